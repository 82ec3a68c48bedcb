//! A workspace built from the files on disk records each as a baseline.

use scribe_format::FileContentId;
use scribe_testkit::files::{read, write};
use scribe_testkit::workspace::{meta, with_baselines};

#[test]
fn with_baselines_records_every_file_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "art/hero.psd",
        &scribe_testkit::noise(10_000, 1),
    );
    write(dir.path(), "readme.txt", b"hello");
    let ws = with_baselines(dir.path(), &meta("game"));
    let read_tx = ws.read().unwrap();
    assert_eq!(read_tx.baseline_count().unwrap(), 2);
    let b = read_tx.baseline("art/hero.psd").unwrap().unwrap();
    assert_eq!(b.size, 10_000);
    assert_eq!(
        b.content,
        FileContentId::of(&read(dir.path(), "art/hero.psd"))
    );
    assert_eq!(b.change, 1);
    assert_eq!(ws.meta().unwrap().repository_name, "game");
}

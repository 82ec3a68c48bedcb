//! `scribe_metadata::backup` while another thread of the owning process
//! keeps writing (the data root's `LOCK` is held, as by a server): every
//! backup is a consistent snapshot read from the archives, between the
//! heads before and after it, and restores to a root that opens.

use std::sync::atomic::{AtomicBool, Ordering};

use scribe_metadata::backup;

use super::support::*;

#[test]
fn backups_taken_during_continuous_writes_are_consistent_snapshots() {
    let e = env();
    commit(&e, vec![add(&e, "first.txt", 1)]);
    let data = e.root.dir().to_owned();
    let out = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    /// Stops the writer however the backups end (a panic included).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    std::thread::scope(|s| {
        let stopping = Stop(&stop);
        let writer = s.spawn(|| {
            let mut n = 2;
            while !stop.load(Ordering::SeqCst) {
                commit(&e, vec![add(&e, &format!("f{n}.txt"), n)]);
                n += 1;
            }
        });
        for i in 0..6 {
            let before = e.repo.head().unwrap();
            let to = out.path().join(format!("b{i}"));
            let r = backup::backup(&data, &to, &|_, _| {}, &|_| {}).unwrap();
            let after = e.repo.head().unwrap();
            assert!(r.online);
            let h = r.manifest.repositories[0].head;
            assert!(before <= h && h <= after, "{before} <= {h} <= {after}");
            let restored = out.path().join(format!("r{i}"));
            backup::restore_backup(&to, &restored, &|_, _| {}, &|_| {}).unwrap();
            let root = reopen(&restored);
            let repo = root.open_repository(e.repo.id()).unwrap();
            assert_eq!(repo.head().unwrap(), h);
            scribe_metadata::archive::verify(&restored.join("catalog.recovery")).unwrap();
            scribe_metadata::archive::verify(repo.archive().dir()).unwrap();
        }
        drop(stopping);
        writer.join().unwrap();
    });
}

/// #16 item 3: `auth-state.redb` is rebuilt from its archive like the
/// other databases, never copied from the file a server holds: a backup
/// taken after the served file was lost (its archive survives on its own
/// volume) still holds every ownership claim.
#[test]
fn a_backup_rebuilds_auth_state_from_its_archive() {
    use scribe_metadata::auth_state::{AuthState, AUTH_STATE_FILE};
    let e = env();
    commit(&e, vec![add(&e, "first.txt", 1)]);
    let data = e.root.dir().to_owned();
    let s = AuthState::create(&data, "studio").unwrap();
    s.claim_workspace(&[1; 16], &[7; 16], &[9; 16]).unwrap();
    // The served file is lost while held open; writes go on.
    std::fs::remove_file(data.join(AUTH_STATE_FILE)).unwrap();
    s.claim_operation(&[1; 16], &[8; 16], &[9; 16], &[3; 32])
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("b");
    let r = backup::backup(&data, &to, &|_, _| {}, &|_| {}).unwrap();
    assert!(r.online);
    assert!(
        r.manifest.files.iter().any(|f| f.path == AUTH_STATE_FILE),
        "{:?}",
        r.manifest.files
    );
    drop(s);
    let restored = out.path().join("r");
    backup::restore_backup(&to, &restored, &|_, _| {}, &|_| {}).unwrap();
    let s = AuthState::open_existing(&restored).unwrap();
    assert_eq!(
        s.workspace_owner(&[1; 16], &[7; 16]).unwrap(),
        Some([9; 16])
    );
    assert_eq!(
        s.operation_owner(&[1; 16], &[8; 16]).unwrap(),
        Some([9; 16])
    );
}

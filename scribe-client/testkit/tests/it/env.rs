//! Every transport of the environment serves the same repository, takes a
//! submit built by the change builders and gives its objects back.

use scribe_format::{OperationId, WorkspaceId};
use scribe_testkit::change::{accepted, change, file, Requests};
use scribe_testkit::{Env, Transport, REPO};

#[test]
fn every_transport_serves_a_submit_and_its_objects() {
    for t in Transport::ALL {
        let mut env = Env::new(t);
        let mut c = env.connect();
        let repos = c.repo_list();
        assert_eq!(repos.len(), 1, "{t:?}");
        assert_eq!(repos[0].name, REPO, "{t:?}");
        let ws = WorkspaceId([1; 16]);
        c.register(ws);
        let content = scribe_testkit::noise(5000, 1);
        let ch = change(&[("a.bin", Some(&content), 0)]);
        assert_eq!(
            accepted(&c.upload_and_submit(ws, OperationId([1; 16]), &ch, "first")),
            1,
            "{t:?}"
        );
        let chunk = file(&content).objects[0].0;
        assert_eq!(c.object(REPO, chunk), content, "{t:?}");
        drop(c);
        match t {
            Transport::InProcess => assert_eq!(env.url(), env.data().display().to_string()),
            Transport::Path => {
                assert_eq!(env.url(), env.data().display().to_string());
                // Nothing in this process holds the data root.
                drop(scribe_server::Service::open(env.data()).unwrap());
            }
            Transport::Tcp => assert_eq!(env.url(), format!("scribe://{}", env.addr())),
            Transport::Tls => {
                assert_eq!(
                    env.url(),
                    format!("scribes://localhost:{}", env.addr().port())
                );
                assert!(env.ca_file().exists());
            }
            Transport::Process => {
                assert_eq!(env.url(), format!("scribe://{}", env.addr()));
                // The server process owns the data root.
                let e = scribe_server::Service::open(env.data()).err().unwrap();
                let pid = env.process().pid();
                assert!(e.to_string().contains(&format!("PID {pid}")), "{e}");
            }
        }
    }
}

#[test]
fn a_killed_server_process_releases_the_data_root_and_restarts_on_its_address() {
    let mut env = Env::new(Transport::Process);
    let addr = env.addr();
    let first = env.process().pid();
    env.process().kill();
    {
        let service = scribe_server::Service::open(env.data()).unwrap();
        let mut c = scribe_server::InProcessConnection::new(service);
        assert_eq!(c.repo_list()[0].name, REPO);
    }
    env.restart_process();
    assert_eq!(env.addr(), addr);
    assert_ne!(env.process().pid(), first);
    assert_eq!(env.connect().repo_list()[0].name, REPO);
}

#[test]
fn a_builder_names_the_repository_or_creates_none() {
    let env = Env::builder(Transport::InProcess)
        .repo(Some("film"))
        .start();
    assert_eq!(env.connect().repo_list()[0].name, "film");
    let env = Env::builder(Transport::Tcp).repo(None).start();
    assert!(env.connect().repo_list().is_empty());
}

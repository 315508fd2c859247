//! Faults a test injects into the operator itself (feature `faults`, which only tests
//! enable: the shipped binary has no such hook): watch streams made to die as a host bug
//! would make them, to see what a dead loop does to liveness.

use std::collections::BTreeSet;
use std::future::Future;

use tokio::sync::watch;

/// The faults injected so far; cheap to clone (clones share them).
#[derive(Debug, Clone, Default)]
pub(crate) struct Faults {
    /// Resources (`plural.version.group`) whose watch streams must die.
    killed_streams: watch::Sender<BTreeSet<String>>,
}

impl Faults {
    /// Makes the watch streams of `resource` die: they panic, as a host bug would.
    pub(crate) fn kill_streams(&self, resource: &str) {
        self.killed_streams.send_modify(|resources| {
            resources.insert(resource.to_owned());
        });
    }

    /// Runs a watch stream of `resource` until it ends, or until a test kills the
    /// streams of `resource`: then it panics, dropping the stream's state on the way
    /// (its loop guard sees the panic and marks the loop dead).
    pub(crate) async fn killable(self, resource: String, stream: impl Future<Output = ()>) {
        let stream = std::pin::pin!(stream);
        let mut killed = self.killed_streams.subscribe();
        let killed = killed.wait_for(|resources| resources.contains(&resource));
        tokio::select! {
            () = stream => {}
            Ok(_) = killed => panic!("the watch stream for {resource} was made to die by a test"),
        }
    }
}

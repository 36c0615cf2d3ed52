//! Where the library's tasks run: smol's global executor, or an executor the embedder gave to
//! [`Builder::executor`](crate::Builder::executor).

use smol::{Executor, Task};
use std::future::Future;
use std::sync::Arc;

/// Spawns the driver's and the transports' tasks. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Spawner {
    /// `None`: smol's global executor (`smol::spawn`).
    executor: Option<Arc<Executor<'static>>>,
}

impl Spawner {
    pub(crate) fn on(executor: Arc<Executor<'static>>) -> Self {
        Spawner {
            executor: Some(executor),
        }
    }

    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Task<T> {
        match &self.executor {
            Some(ex) => ex.spawn(future),
            None => smol::spawn(future),
        }
    }
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.executor {
            Some(_) => "Spawner(embedder's executor)",
            None => "Spawner(smol global executor)",
        })
    }
}

//! The library's view of what servers offer besides tools: resources, resource templates
//! and prompts (read from the shared snapshot, like the tool view), and the operations on
//! them — reading a resource, subscribing to one, getting a prompt, completing an argument,
//! setting a server's log level. Each operation is numbered like a call, completes exactly
//! once in the core, and is cancelled when its future is dropped before it completed.

use super::Switchboard;
use crate::driver::link::{Error, Request};
use async_channel::Sender;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::catalog::{
    Completion, CompletionRef, LogLevel, Operation, OperationOutcome, OperationResult, Prompt,
    PromptResult, ReadResult, Resource, ResourceTemplate, TaskPage,
};
use switchboard_core::manager::{CallError, CallId, Input};

/// Cancels an operation whose future was dropped before it completed.
struct CancelOnDrop {
    requests: Sender<Request>,
    call: CallId,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            // Best effort, as for a dropped call: a full queue leaves it to its deadline.
            let _ = self
                .requests
                .try_send(Request::Input(Input::CancelCall { call: self.call }));
        }
    }
}

impl Switchboard {
    /// The resources in the view (live, or deferred from the cache while their server
    /// connects), ordered by URI, then server.
    pub fn resources(&self) -> Arc<Vec<Resource>> {
        self.inner
            .shared
            .lock()
            .map(|s| s.resources.clone())
            .unwrap_or_default()
    }

    /// The resource templates in the view, ordered by template, then server.
    pub fn resource_templates(&self) -> Arc<Vec<ResourceTemplate>> {
        self.inner
            .shared
            .lock()
            .map(|s| s.templates.clone())
            .unwrap_or_default()
    }

    /// The prompts in the view, ordered by qualified name.
    pub fn prompts(&self) -> Arc<Vec<Prompt>> {
        self.inner
            .shared
            .lock()
            .map(|s| s.prompts.clone())
            .unwrap_or_default()
    }

    /// Run one operation (with this timeout instead of the call timeout) and wait for its
    /// result. Dropping the future before it completed cancels it.
    pub async fn operation(
        &self,
        op: Operation,
        timeout: Option<Duration>,
    ) -> Result<OperationResult, Error> {
        let call = CallId(self.inner.next_call.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = crate::rt::oneshot();
        let request = Request::Operation {
            call,
            op,
            timeout,
            reply: tx,
        };
        self.inner
            .requests
            .send(request)
            .await
            .map_err(|_| Error::Stopped)?;
        let mut guard = CancelOnDrop {
            requests: self.inner.requests.clone(),
            call,
            armed: true,
        };
        let outcome = rx.await;
        guard.armed = false;
        match outcome {
            Ok(OperationOutcome::Ok(r)) => Ok(r),
            Ok(OperationOutcome::Err(CallError::UnknownServer { server })) => {
                Err(Error::UnknownServer(server))
            }
            Ok(OperationOutcome::Err(e)) => Err(Error::Call(e)),
            Ok(OperationOutcome::Cancelled) => Err(Error::Cancelled),
            Ok(other) => Err(Error::Call(CallError::Protocol(format!(
                "unexpected operation outcome {other:?}"
            )))),
            Err(_) => Err(Error::Stopped),
        }
    }

    /// Read a resource by URI (`resources/read`). Without `server`, the one server that
    /// lists it; a URI listed by several is an error naming them
    /// ([`CallError::AmbiguousResource`]). A deferred resource waits for its server.
    pub async fn read_resource(
        &self,
        uri: &str,
        server: Option<&str>,
    ) -> Result<ReadResult, Error> {
        let op = Operation::ReadResource {
            uri: uri.to_string(),
            server: server.map(str::to_string),
        };
        match self.operation(op, None).await? {
            OperationResult::Read(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// Subscribe to a resource's updates (`resources/subscribe`): the server then sends
    /// `Event::ResourceUpdated` for it. Returns the server that accepted.
    pub async fn subscribe(&self, uri: &str, server: Option<&str>) -> Result<String, Error> {
        let op = Operation::Subscribe {
            uri: uri.to_string(),
            server: server.map(str::to_string),
        };
        done(self.operation(op, None).await?)
    }

    /// Stop a subscription (`resources/unsubscribe`). Returns the server that accepted.
    pub async fn unsubscribe(&self, uri: &str, server: Option<&str>) -> Result<String, Error> {
        let op = Operation::Unsubscribe {
            uri: uri.to_string(),
            server: server.map(str::to_string),
        };
        done(self.operation(op, None).await?)
    }

    /// Get a prompt by qualified name with its arguments (`prompts/get`). A deferred prompt
    /// waits for its server.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<PromptResult, Error> {
        let op = Operation::GetPrompt {
            name: name.to_string(),
            arguments,
        };
        match self.operation(op, None).await? {
            OperationResult::Prompt(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Complete an argument of a prompt or a resource template (`completion/complete`):
    /// `value` is what was typed so far, `context` the arguments already chosen.
    pub async fn complete(
        &self,
        reference: CompletionRef,
        argument: &str,
        value: &str,
        context: BTreeMap<String, String>,
    ) -> Result<Completion, Error> {
        let op = Operation::Complete {
            reference,
            argument: argument.to_string(),
            value: value.to_string(),
            context,
        };
        match self.operation(op, None).await? {
            OperationResult::Completion(c) => Ok(c),
            other => Err(unexpected(other)),
        }
    }

    /// One page of `server`'s tasks (`tasks/list`): start with `cursor` `None`, then pass
    /// each page's `next_cursor` until it is `None`.
    pub async fn list_tasks(
        &self,
        server: &str,
        cursor: Option<String>,
    ) -> Result<TaskPage, Error> {
        let op = Operation::ListTasks {
            server: server.to_string(),
            cursor,
        };
        match self.operation(op, None).await? {
            OperationResult::Tasks(page) => Ok(page),
            other => Err(unexpected(other)),
        }
    }

    /// Ask a server to send log messages from `level` up (`logging/setLevel`).
    pub async fn set_log_level(&self, server: &str, level: LogLevel) -> Result<(), Error> {
        let op = Operation::SetLogLevel {
            server: server.to_string(),
            level,
        };
        done(self.operation(op, None).await?).map(drop)
    }
}

fn done(result: OperationResult) -> Result<String, Error> {
    match result {
        OperationResult::Done { server } => Ok(server),
        other => Err(unexpected(other)),
    }
}

fn unexpected(result: OperationResult) -> Error {
    Error::Call(CallError::Protocol(format!(
        "unexpected operation result {result:?}"
    )))
}

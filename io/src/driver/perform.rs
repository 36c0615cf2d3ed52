//! Performing the core's commands: opening and closing transports, sending frames, loading
//! and storing the tool cache. Everything slow runs in a task of its own and reports back on
//! the driver's inbound channel, so the driver loop never waits on a process, a socket or a
//! file.

use super::events::Batch;
use super::{Driver, Inbound, Internal, Transport};
use crate::cache::now_unix_ms;
use crate::http::{HttpTarget, HttpTransport};
use crate::secrets::resolve_secrets;
use crate::stdio::{StdioCommand, StdioTransport};
use async_executor::Task;
use switchboard_core::config::TransportConfig;
use switchboard_core::manager::{ConnId, Output, TransportEvent};

impl Driver {
    /// Drains the core's outputs: performs each command here and hands each event to
    /// [`Driver::deliver`], then publishes what the batch changed.
    pub(super) fn perform_outputs(&mut self) {
        let mut batch = Batch::new(self);
        while let Some(out) = self.m.poll_output() {
            match out {
                Output::OpenTransport {
                    conn,
                    server,
                    config,
                } => self.open(conn, server, config),
                Output::Send { conn, frame, meta } => {
                    if let Some(t) = self.transports.get(&conn) {
                        match t.send(frame, meta) {
                            Ok(()) => {}
                            // The server is gone or going: its terminal event (the exit
                            // status, its last stderr lines) fails what is in flight, this
                            // request included, so a crash reads as a crash and not as
                            // "the transport is closed".
                            Err(error) if t.is_closed() => {
                                tracing::debug!(target: "switchboard", "a frame for a transport that has ended was dropped: {error}");
                            }
                            Err(error) => self.local.push_back(Inbound::Transport(
                                conn,
                                TransportEvent::Failed { error },
                            )),
                        }
                    }
                }
                Output::CloseTransport { conn } => {
                    // Cancelling a task that is still resolving secrets or spawning stops it;
                    // if it already spawned, `on_internal` closes what arrives. A conn we do
                    // not hold (already closed, or reaped by itself) is a no-op: the core
                    // also closes a transport whose `Opened` reached it after the attempt's
                    // end (its `Closed` can overtake the spawn's completion).
                    if let Some(task) = self.opening.remove(&conn) {
                        self.abort_opening(conn, task);
                    }
                    if let Some(t) = self.transports.remove(&conn) {
                        self.close_in_background(conn, t);
                    }
                }
                Output::LoadCache { server, key } => match &self.cfg.cache {
                    Some(cache) => {
                        let cache = cache.clone();
                        let tx = self.inbound_tx.clone();
                        self.background.push(self.cfg.spawner.spawn(async move {
                            let k = key.clone();
                            let entry =
                                blocking::unblock(move || cache.load_entry(&k, now_unix_ms()))
                                    .await;
                            let (tools, catalog) = match entry {
                                Some((tools, catalog)) => (Some(tools), catalog),
                                None => (None, None),
                            };
                            let loaded = Internal::CacheLoaded {
                                server,
                                key,
                                tools,
                                catalog,
                            };
                            let _ = tx.send(Inbound::Internal(loaded)).await;
                        }));
                    }
                    None => self
                        .local
                        .push_back(Inbound::Internal(Internal::CacheLoaded {
                            server,
                            key,
                            tools: None,
                            catalog: None,
                        })),
                },
                Output::StoreCache {
                    key,
                    tools,
                    catalog,
                    ..
                } => {
                    if let Some(cache) = &self.cfg.cache {
                        let cache = cache.clone();
                        self.background.push(self.cfg.spawner.spawn(async move {
                            let _ = blocking::unblock(move || {
                                if let Err(e) = cache.store_entry(&key, &tools, Some(&catalog), now_unix_ms()) {
                                    tracing::warn!(target: "switchboard", server = %key.server, "could not write the tool cache: {e}");
                                }
                            })
                            .await;
                        }));
                    }
                }
                Output::Event(ev) => self.deliver(ev, &mut batch),
                other => {
                    tracing::debug!(target: "switchboard", "unhandled core output: {other:?}");
                }
            }
        }
        self.background.retain(|t| !t.is_finished());
        self.finish(batch);
    }

    fn open(&mut self, conn: ConnId, server: String, config: TransportConfig) {
        let tx = self.inbound_tx.clone();
        let opts = self.cfg.stdio.clone();
        let http_opts = self.cfg.http.clone();
        let registry = self.cfg.registry.clone();
        let secrets = self.secrets.clone();
        let creds = self.cfg.credentials.clone();
        let auth = self.auth.get(&server).cloned();
        let layer = self.auth_layer(&server, &config);
        self.conn_server.insert(conn, server.clone());
        let spawner = self.cfg.spawner.clone();
        let task = self.cfg.spawner.spawn(async move {
            let resolved =
                resolve_secrets(&server, config, auth.as_ref(), creds.as_deref(), &secrets).await;
            let msg = match resolved {
                Err(e) => Internal::OpenFailed(conn, e),
                Ok(config) => match HttpTarget::from_config(config.clone()) {
                    // HTTP: Opened once the URL is valid (legacy SSE: once the endpoint event
                    // arrived); see the `http` module docs.
                    Some(target) => {
                        match HttpTransport::open_on(
                            &spawner,
                            &server,
                            target,
                            &http_opts,
                            layer,
                            conn,
                            tx.clone(),
                        )
                        .await
                        {
                            Ok(t) => Internal::Opened(conn, Transport::Http(t)),
                            Err(e) => Internal::OpenFailed(conn, e),
                        }
                    }
                    None => match StdioCommand::from_config(config) {
                        Some(cmd) => match StdioTransport::spawn_waiting_on(
                            &spawner,
                            &server,
                            cmd,
                            &opts,
                            &registry,
                            conn,
                            tx.clone(),
                        )
                        .await
                        {
                            Ok(t) => Internal::Opened(conn, Transport::Stdio(t)),
                            Err(e) => Internal::OpenFailed(conn, e),
                        },
                        None => Internal::OpenFailed(conn, "unknown transport".into()),
                    },
                },
            };
            let _ = tx.send(Inbound::Internal(msg)).await;
        });
        self.opening.insert(conn, task);
    }

    /// The authorization layer of an HTTP server (the one it had, unless its URL changed).
    fn auth_layer(
        &mut self,
        server: &str,
        config: &TransportConfig,
    ) -> Option<std::sync::Arc<crate::auth::AuthLayer>> {
        let (TransportConfig::Http { url, headers } | TransportConfig::Sse { url, headers }) =
            config
        else {
            return None;
        };
        if let Some(layer) = self.auth_layers.get(server).filter(|l| l.url() == url) {
            return Some(layer.clone());
        }
        let oauth = self.oauth.get(server).cloned().unwrap_or_default();
        // Headers made by commands, run again after a 401.
        let sources = crate::auth::HeaderSources {
            helper: self.helpers.get(server).cloned(),
            commands: headers
                .iter()
                .filter(|(_, v)| !v.starts_with("!!"))
                .filter_map(|(k, v)| Some((k.clone(), v.strip_prefix('!')?.to_string())))
                .collect(),
            cache: Some(self.secrets.clone()),
            provider: self
                .cfg
                .credentials
                .clone()
                .zip(self.auth.get(server).cloned()),
        };
        let layer = crate::auth::AuthLayer::with_sources(
            server,
            url,
            oauth,
            self.cfg.authorization.clone(),
            sources,
        );
        self.auth_layers.insert(server.to_string(), layer.clone());
        Some(layer)
    }

    pub(super) fn close_in_background(&mut self, conn: ConnId, t: Transport) {
        let tx = self.inbound_tx.clone();
        let task = self.cfg.spawner.spawn(async move {
            t.close().await;
            let _ = tx.send(Inbound::Internal(Internal::Closed(conn))).await;
        });
        self.closing.insert(conn, task);
    }

    /// Cancel an opening task; `Internal::Aborted` reports when it is gone.
    fn abort_opening(&mut self, conn: ConnId, task: Task<()>) {
        let tx = self.inbound_tx.clone();
        let abort = self.cfg.spawner.spawn(async move {
            task.cancel().await;
            let _ = tx.send(Inbound::Internal(Internal::Aborted(conn))).await;
        });
        self.aborting.insert(conn, abort);
    }

    pub(super) fn conn_is_open(&self, conn: &ConnId) -> bool {
        self.opening.contains_key(conn)
            || self.aborting.contains_key(conn)
            || self.transports.contains_key(conn)
            || self.closing.contains_key(conn)
    }

    pub(super) fn forget_if_gone(&mut self, conn: ConnId) {
        if !self.conn_is_open(&conn) {
            self.conn_server.remove(&conn);
        }
    }
}

//! The tool view: every server's slice of qualified tool names, live or deferred. A server's
//! slice is replaced on its own, found by identity, not by name prefix; another server's tool
//! is renamed only when a name collides. Names that leave the view are remembered as retired,
//! so a call to one is told why it no longer routes instead of hearing "unknown tool".

use super::errors::CallError;
use super::servers::{CacheState, Stage};
use super::{Event, Manager};
use crate::names::NameTable;
use crate::tool::{Tool, ToolRef};

impl Manager {
    /// The tool view, ordered by qualified name.
    pub fn tools(&self) -> Vec<Tool> {
        self.tool_refs().iter().map(ToolRef::to_tool).collect()
    }

    /// The tool view borrowed, sorted by qualified name: what [`Manager::tools`] returns,
    /// without copying a name or a definition.
    pub fn tool_refs(&self) -> Vec<ToolRef<'_>> {
        let mut out = Vec::with_capacity(self.names.len());
        for (name, s) in &self.servers {
            let Some(deferred) = s.exposed else {
                continue;
            };
            let list = match (&s.cache, deferred) {
                (CacheState::Hit(t), true) => t,
                (_, true) => continue,
                (_, false) => &s.tools,
            };
            // The table knows where each of its tools sits in the list it was given (`expose`
            // gives it exactly this list); the name check guards against a stale position.
            for (q, tool, index) in self.names.server_tools_indexed(name) {
                let def = match list.get(index) {
                    Some(def) if def.name == tool => def,
                    _ => match list.iter().find(|d| d.name == tool) {
                        Some(def) => def,
                        None => continue,
                    },
                };
                out.push(ToolRef {
                    qualified_name: q,
                    server: name,
                    def,
                    deferred,
                });
            }
        }
        // Each server's tools come in raw-name order, which is usually their qualified-name
        // order too: a stable sort merges those runs instead of sorting from scratch.
        out.sort_by(|a, b| a.qualified_name.cmp(b.qualified_name));
        out
    }

    /// A number that is the same as at an earlier call only if the tool view
    /// ([`Manager::tool_refs`]) cannot have changed since: an observer that keeps a copy of
    /// the view can skip rebuilding it. (It may change without the view changing.)
    pub fn view_generation(&self) -> u64 {
        self.view_gen
    }

    /// Number of tools in the view.
    pub fn tool_count(&self) -> usize {
        self.names.len()
    }

    /// Route a qualified name to (server, raw tool name).
    pub fn resolve_tool(&self, qualified: &str) -> Option<(&str, &str)> {
        self.names.resolve(qualified)
    }

    pub(super) fn expose(&mut self, server: &str, deferred: bool) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let list = if deferred {
            match &s.cache {
                CacheState::Hit(t) => t,
                _ => return,
            }
        } else {
            &s.tools
        };
        s.exposed = Some(deferred);
        self.view_gen += 1;
        if s.catalog.has_any() {
            self.catalog.generation += 1;
        }
        let before = slice_of(&self.names, server);
        // Only this server's slice changes, found by identity, not by name prefix: another
        // server whose name shares the prefix keeps its tools.
        self.names
            .set_server_tools(server, list.iter().map(|t| t.name.as_str()));
        self.retire(server, before);
        self.sync_prompt_names(server);
    }

    /// Remember the names of `before` that `server`'s slice no longer holds, and forget the
    /// retired names its slice holds again.
    fn retire(&mut self, server: &str, before: Vec<(String, String)>) {
        for (q, tool) in before {
            if self.names.resolve(&q).is_none() {
                self.retired.insert(q, (server.to_string(), tool));
            }
        }
        if self.retired.is_empty() {
            return;
        }
        let now: Vec<String> = self
            .names
            .server_tools(server)
            .map(|(q, _)| q.to_string())
            .collect();
        for q in now {
            self.retired.remove(&q);
        }
    }

    pub(super) fn withdraw(&mut self, server: &str) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if s.exposed.take().is_some() {
            self.view_gen += 1;
            if s.catalog.has_any() {
                self.catalog.generation += 1;
            }
            let announce = s.round.is_none();
            let before = slice_of(&self.names, server);
            self.names.remove_server(server);
            self.retire(server, before);
            self.sync_prompt_names(server);
            if announce {
                self.emit(Event::ToolsChanged {
                    servers: vec![server.to_string()],
                });
            }
        }
    }

    /// Why a qualified name does not route: its tool left its server's list, its server is
    /// not connected, or the name was never in the view.
    pub(super) fn unknown_tool_error(&mut self, tool: &str) -> CallError {
        let unknown = || CallError::UnknownTool {
            tool: tool.to_string(),
        };
        let Some((server, raw)) = self.retired.get(tool) else {
            return unknown();
        };
        let (server, raw) = (server.clone(), raw.clone());
        let running = self
            .servers
            .get(&server)
            .filter(|s| !matches!(s.phase, Stage::Idle));
        match running {
            Some(s) if s.exposed.is_some() && self.names.qualified(&server, &raw).is_none() => {
                self.counters.calls_to_retired_tools += 1;
                CallError::RetiredTool {
                    server,
                    raw,
                    called_as: Some(tool.to_string()),
                }
            }
            // Its server still offers the tool, under another name now (a collision among
            // other servers' tools moved it), or the server is pending without tools.
            Some(_) => unknown(),
            None => {
                self.counters.calls_to_retired_tools += 1;
                CallError::WithdrawnTool {
                    tool: tool.to_string(),
                    server,
                }
            }
        }
    }
}

/// `server`'s (qualified name, raw tool) pairs in the view: O(its tools).
fn slice_of(names: &NameTable, server: &str) -> Vec<(String, String)> {
    names
        .server_tools(server)
        .map(|(q, t)| (q.to_string(), t.to_string()))
        .collect()
}

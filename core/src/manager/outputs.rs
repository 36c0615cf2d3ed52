//! Structured results checked against their tool's `outputSchema`. A tool that declares one
//! promises a conforming `structuredContent` in every result that is not an error; a result
//! that breaks the promise fails its call with [`CallError::OutputSchema`], so an agent never
//! acts on data of a shape it was not told about. Results with `isError` are passed on as
//! they came. Each tool's schema is compiled once per tool list (when first needed) by the
//! embedder's [`OutputValidator`](crate::schema::OutputValidator); one that does not compile
//! leaves the tool callable and its results unchecked, with a warning.

use super::errors::{CallError, OutputProblem};
use super::{CallId, CallOutcome, Level, Manager};
use crate::schema::Compiled;
use crate::tool::ToolResult;

impl Manager {
    /// The outcome of a call whose server answered with `result`.
    pub(super) fn check_output(&mut self, call: CallId, result: ToolResult) -> CallOutcome {
        let Some(validator) = self.opts.output_validator.clone() else {
            return CallOutcome::Ok(result);
        };
        let Some(c) = self.calls.get(&call) else {
            return CallOutcome::Ok(result);
        };
        // A tool already known to have no usable schema passes without copying its names.
        let known = self
            .servers
            .get(&c.server)
            .and_then(|s| s.schemas.get(&c.tool));
        if matches!(known, Some(Compiled::None | Compiled::Unusable)) {
            return CallOutcome::Ok(result);
        }
        let (server, tool) = (c.server.clone(), c.tool.clone());
        let called_with = c.output_schema.clone();
        let Some(s) = self.servers.get_mut(&server) else {
            return CallOutcome::Ok(result);
        };
        let compiled = match s.schemas.get(&tool) {
            Some(known) => known.clone(),
            None => {
                // Only tools of the current list get an entry, so the map stays within it. A
                // tool the list no longer has (it changed while the call ran) is checked
                // against the definition the call was made against.
                let listed = s.tools.iter().find(|t| t.name == tool);
                let in_list = listed.is_some();
                let schema = match listed {
                    Some(def) => def.output_schema.clone(),
                    None => called_with,
                };
                let compiled = match &schema {
                    None => Compiled::None,
                    Some(schema) => match validator.0.compile(schema) {
                        Ok(schema) => Compiled::Schema(schema),
                        Err(reason) => {
                            self.counters.output_schema_unusable += 1;
                            self.diag(
                                Some(&server),
                                Level::Warn,
                                format!(
                                    "tool \"{tool}\": its output schema cannot be used ({reason}); its results are not checked"
                                ),
                            );
                            Compiled::Unusable
                        }
                    },
                };
                if let Some(s) = self.servers.get_mut(&server).filter(|_| in_list) {
                    s.schemas.insert(tool.clone(), compiled.clone());
                }
                compiled
            }
        };
        let Compiled::Schema(schema) = compiled else {
            return CallOutcome::Ok(result);
        };
        if result.is_error {
            self.counters.output_schema_error_results += 1;
            return CallOutcome::Ok(result);
        }
        let problem = match &result.structured_content {
            None => OutputProblem::Missing,
            Some(value) => match schema.check(value) {
                Ok(()) => {
                    self.counters.output_schema_passed += 1;
                    return CallOutcome::Ok(result);
                }
                Err(mismatch) => OutputProblem::Mismatch(mismatch),
            },
        };
        self.counters.output_schema_refused += 1;
        CallOutcome::Err(CallError::OutputSchema {
            server,
            tool,
            problem,
        })
    }
}

//! Checking a tool's structured result against the `outputSchema` it declares.
//!
//! The core decides *when* a result is checked and what a failed check means (see
//! `Manager` and [`CallError::OutputSchema`](crate::CallError::OutputSchema)); the check
//! itself — JSON Schema 2020-12 — is a pure function the embedder passes in through
//! [`ManagerOptions::output_validator`](crate::ManagerOptions::output_validator). That keeps a
//! schema engine out of the core, and lets the simulator drive the same decisions with a
//! checker of its own. A checker must never fetch anything: only `$ref`s inside the schema
//! itself resolve, and a schema that needs anything else does not compile.

use crate::tool::RawJson;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// Compiles output schemas. Called at most once per tool and tool listing: the core keeps
/// what it returns until the server lists its tools again.
pub trait OutputValidator: Send + Sync {
    /// Compile `schema` (JSON Schema 2020-12 unless its `$schema` names another dialect the
    /// checker knows). `Err` gives the reason it cannot be used; the core then keeps the tool
    /// and leaves its results unchecked, with a warning.
    fn compile(&self, schema: &RawJson) -> Result<Arc<dyn CompiledSchema>, String>;
}

/// One compiled output schema.
pub trait CompiledSchema: Send + Sync {
    /// `Ok` when `instance` conforms; otherwise its first violation.
    fn check(&self, instance: &Value) -> Result<(), SchemaMismatch>;
}

/// Where and why a structured result does not conform to its output schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaMismatch {
    /// The JSON Pointer of the offending value in the result (`""`: the whole result).
    pub path: String,
    /// What is wrong there, in the checker's words.
    pub message: String,
    /// How many more violations there are beyond this one (as far as the checker counted).
    pub more: usize,
}

impl fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)?;
        } else {
            write!(f, "at {}: {}", self.path, self.message)?;
        }
        match self.more {
            0 => Ok(()),
            1 => write!(f, " (and 1 more violation)"),
            n => write!(f, " (and {n} more violations)"),
        }
    }
}

/// An [`OutputValidator`] shared by the options (compared by identity).
#[derive(Clone)]
pub struct SharedValidator(pub Arc<dyn OutputValidator>);

impl SharedValidator {
    /// Share `validator`.
    pub fn new(validator: impl OutputValidator + 'static) -> Self {
        SharedValidator(Arc::new(validator))
    }
}

impl fmt::Debug for SharedValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedValidator(..)")
    }
}

impl PartialEq for SharedValidator {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What the core remembers about one tool's output schema until its server lists again.
#[derive(Clone)]
pub(crate) enum Compiled {
    /// The tool declares no output schema.
    None,
    /// Its schema did not compile: its results are not checked.
    Unusable,
    /// Its compiled schema.
    Schema(Arc<dyn CompiledSchema>),
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compiled::None => "None",
            Compiled::Unusable => "Unusable",
            Compiled::Schema(_) => "Schema(..)",
        })
    }
}

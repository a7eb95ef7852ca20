//! The core of the StableHLO text builder: one `func.func public @main` under construction,
//! with a stack of open blocks for nested regions (while/if/case/reduce bodies).
//!
//! Every op is printed in MLIR's generic form (`%3 = "stablehlo.add"(%1, %2) : (...) -> ...`)
//! by the MLIR text layer ([`crate::mlir`]), the printer the Mosaic emitter uses too, and the
//! form every StableHLO parser accepts. Types are checked when
//! an op is built (see `ops/`), so `finish` only ever returns text that should verify.

use super::error::BuildError;
use super::types::{TensorType, Value};
use crate::ir::Loc;
use crate::mlir;
use std::fmt;

/// A finished StableHLO module (textual MLIR).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Module {
    text: String,
}

impl Module {
    pub fn text(&self) -> &str {
        &self.text
    }
    pub fn into_text(self) -> String {
        self.text
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// One open block: the function body or a region's entry block.
struct Block {
    scope: u32,
    /// Values from enclosing blocks are invisible inside an isolated block (reduce bodies,
    /// scatter combiners: their computations are scalar functions of their arguments only).
    isolated: bool,
    args: Vec<Value>,
    lines: Vec<String>,
}

/// Builds the single function `@main` of a module. Ops are methods (in `ops/`), e.g.
/// `f.add(&a, &b)?`; region ops take closures that receive this builder and the region's
/// block arguments.
pub struct FuncBuilder {
    name: String,
    args: Vec<Value>,
    /// SSA name per value id (`%3`, `%7#1`, `%a2`).
    names: Vec<String>,
    /// Scope (block) id in which each value id is defined.
    value_scope: Vec<u32>,
    types: Vec<TensorType>,
    blocks: Vec<Block>,
    next_scope: u32,
    /// Private functions of other modules this one calls ([`FuncBuilder::call_module`]).
    callees: Vec<String>,
    /// The user's location printed after each op (kernels set it per IR op); None prints
    /// none, as for the ATen ops' modules.
    loc: Option<Loc>,
    /// (argument index, result index): the result may reuse the donated argument's memory
    /// (`tf.aliasing_output`, as JAX marks donated arguments).
    aliases: Vec<(usize, usize)>,
}

impl Default for FuncBuilder {
    fn default() -> Self {
        FuncBuilder::new("main")
    }
}

impl FuncBuilder {
    /// A function named `name` (the runtime and PJRT expect `main` for entry points).
    pub fn new(name: &str) -> Self {
        FuncBuilder {
            name: name.to_string(),
            args: Vec::new(),
            names: Vec::new(),
            value_scope: Vec::new(),
            types: Vec::new(),
            blocks: vec![Block {
                scope: 0,
                isolated: false,
                args: Vec::new(),
                lines: Vec::new(),
            }],
            next_scope: 1,
            callees: Vec::new(),
            loc: None,
            aliases: Vec::new(),
        }
    }

    /// Sets the location of the ops emitted next; returns the previous one (to restore after
    /// an op whose regions emit ops of their own locations).
    pub(crate) fn set_loc(&mut self, loc: Option<Loc>) -> Option<Loc> {
        std::mem::replace(&mut self.loc, loc)
    }

    /// Appends a function argument. Arguments must be added before they are used, but may be
    /// added at any time (the signature is printed by `finish`).
    pub fn arg(&mut self, ty: TensorType) -> Value {
        let v = self.fresh(ty, |id| format!("%arg{id}"), 0);
        self.args.push(v.clone());
        v
    }

    pub fn args(&self) -> &[Value] {
        &self.args
    }

    /// Lets result `result` reuse argument `arg`'s memory when the caller donates it (the
    /// two must have the same type; `finish` checks).
    pub fn alias_output(&mut self, arg: usize, result: usize) {
        self.aliases.push((arg, result));
    }

    /// Closes the function with `results` as its return values and prints the module.
    pub fn finish(mut self, results: &[&Value]) -> Result<Module, BuildError> {
        self.check_visible("func.return", results)?;
        let types: Vec<String> = results.iter().map(|v| v.ty.to_string()).collect();
        let ret = self.terminator("func.return", results);
        self.blocks[0].lines.extend(ret);
        for &(arg, result) in &self.aliases {
            let (a, r) = (self.args.get(arg), results.get(result));
            if a.zip(r).is_none_or(|(a, r)| a.ty != r.ty) {
                return Err(BuildError::Alias {
                    arg,
                    result,
                    args: self.args.len(),
                    results: results.len(),
                });
            }
        }
        let sig: Vec<String> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let alias = match self.aliases.iter().find(|(arg, _)| *arg == i) {
                    Some((_, r)) => format!(" {{tf.aliasing_output = {r} : i32}}"),
                    None => String::new(),
                };
                format!("{}: {}{alias}", self.names[a.id as usize], a.ty)
            })
            .collect();
        let mut text = String::from("module {\n");
        text += &format!(
            "  func.func public @{}({}) -> ({}) {{\n",
            self.name,
            sig.join(", "),
            types.join(", ")
        );
        for line in &self.blocks[0].lines {
            for l in line.lines() {
                text += &format!("    {l}\n");
            }
        }
        text += "  }\n";
        for callee in &self.callees {
            text += callee;
        }
        text += "}\n";
        Ok(Module { text })
    }

    /// Calls the `@main` of another finished module (a kernel lowered on its own, used as an
    /// ATen override) as a private function of this one, with `args`, returning values of
    /// `results` types. Its functions are copied in under fresh names, so its SSA names and
    /// helpers cannot clash with this module's.
    pub fn call_module(
        &mut self,
        module: &str,
        args: &[&Value],
        results: Vec<TensorType>,
    ) -> Result<Vec<Value>, BuildError> {
        let body = module
            .trim()
            .strip_prefix("module {")
            .and_then(|b| b.strip_suffix('}'))
            .ok_or_else(|| {
                BuildError::shape(
                    "func.call",
                    "the callee module must be a plain `module { ... }`",
                )
            })?;
        if !body.contains("func.func public @main(") {
            return Err(BuildError::shape(
                "func.call",
                "the callee module has no `func.func public @main`",
            ));
        }
        let prefix = format!("callee{}_", self.callees.len());
        // Every function of the callee gets the prefix; `@main` also becomes private.
        let renamed = body
            .replace("func.func public @main(", "func.func private @main(")
            .replace('@', &format!("@{prefix}"));
        self.callees.push(renamed);
        let attrs = format!("callee = @{prefix}main");
        self.emit("func.call", args, &attrs, Vec::new(), results)
    }

    /// Emits one op in generic form and returns its results. `attrs` is the text inside
    /// `{...}` (empty for none); `regions` are rendered regions from [`FuncBuilder::region`].
    /// Callers (the typed ops) have already checked operand and result types.
    pub(crate) fn emit(
        &mut self,
        op: &'static str,
        operands: &[&Value],
        attrs: &str,
        regions: Vec<Vec<String>>,
        results: Vec<TensorType>,
    ) -> Result<Vec<Value>, BuildError> {
        self.check_visible(op, operands)?;
        let scope = self.current_scope();
        let (head, values): (String, Vec<Value>) = match results.len() {
            0 => (String::new(), Vec::new()),
            1 => {
                let v = self.fresh(results[0].clone(), |id| format!("%{id}"), scope);
                (format!("{} = ", self.names[v.id as usize]), vec![v])
            }
            n => {
                let base = self.names.len();
                let vs: Vec<Value> = results
                    .iter()
                    .enumerate()
                    .map(|(i, t)| self.fresh(t.clone(), |_| format!("%{base}#{i}"), scope))
                    .collect();
                (format!("%{base}:{n} = "), vs)
            }
        };
        let in_types: Vec<String> = operands.iter().map(|v| v.ty.to_string()).collect();
        let named: Vec<(&str, &str)> = operands
            .iter()
            .zip(&in_types)
            .map(|(v, t)| (self.names[v.id as usize].as_str(), t.as_str()))
            .collect();
        let out_types: Vec<String> = results.iter().map(|t| t.to_string()).collect();
        let mut lines = mlir::generic_op(&head, op, &named, attrs, &out_types, regions);
        mlir::loc::attach(&mut lines, self.loc);
        self.current_block().lines.extend(lines);
        Ok(values)
    }

    /// Like [`FuncBuilder::emit`] for the common single-result case.
    pub(crate) fn emit1(
        &mut self,
        op: &'static str,
        operands: &[&Value],
        attrs: &str,
        result: TensorType,
    ) -> Result<Value, BuildError> {
        let mut vs = self.emit(op, operands, attrs, Vec::new(), vec![result])?;
        Ok(vs.remove(0))
    }

    /// Builds one region with a single block whose arguments have `arg_types`; `body` builds
    /// its ops and returns the values it yields (printed as `stablehlo.return`). Returns the
    /// rendered region and the yielded types. The block is closed even when `body` fails, so
    /// the builder stays usable after an error.
    pub(crate) fn region<E: From<BuildError>>(
        &mut self,
        op: &'static str,
        arg_types: &[TensorType],
        isolated: bool,
        body: impl FnOnce(&mut Self, &[Value]) -> Result<Vec<Value>, E>,
    ) -> Result<(Vec<String>, Vec<TensorType>), E> {
        let scope = self.next_scope;
        self.next_scope += 1;
        let args: Vec<Value> = arg_types
            .iter()
            .map(|t| self.fresh(t.clone(), |id| format!("%a{id}"), scope))
            .collect();
        self.blocks.push(Block {
            scope,
            isolated,
            args: args.clone(),
            lines: Vec::new(),
        });
        let yielded = body(self, &args).and_then(|ys| {
            let refs: Vec<&Value> = ys.iter().collect();
            self.check_visible(op, &refs)?;
            let ret = self.terminator("stablehlo.return", &refs);
            self.current_block().lines.extend(ret);
            Ok(ys)
        });
        let block = self
            .blocks
            .pop()
            .expect("region pushed a block above the function body");
        let yielded = yielded?;
        let args: Vec<(String, String)> = block
            .args
            .iter()
            .map(|a| (self.names[a.id as usize].clone(), a.ty.to_string()))
            .collect();
        let lines = mlir::block(&args, block.lines);
        Ok((lines, yielded.into_iter().map(|v| v.ty).collect()))
    }

    /// Errors unless every value is defined in the current block or a visible enclosing one.
    pub(crate) fn check_visible(
        &self,
        op: &'static str,
        values: &[&Value],
    ) -> Result<(), BuildError> {
        for v in values {
            if !self.is_visible(v) {
                return Err(BuildError::NotVisible { op, id: v.id });
            }
        }
        Ok(())
    }

    fn is_visible(&self, v: &Value) -> bool {
        let Some(&scope) = self.value_scope.get(v.id as usize) else {
            return false;
        };
        // A value of another builder may share an id; a different type gives it away.
        if self.types[v.id as usize] != v.ty {
            return false;
        }
        for b in self.blocks.iter().rev() {
            if b.scope == scope {
                return true;
            }
            if b.isolated {
                return false;
            }
        }
        false
    }

    fn fresh(&mut self, ty: TensorType, name: impl FnOnce(usize) -> String, scope: u32) -> Value {
        let id = self.names.len();
        self.names.push(name(id));
        self.value_scope.push(scope);
        self.types.push(ty.clone());
        Value { id: id as u32, ty }
    }

    /// A terminator (`func.return`, `stablehlo.return`) of `values`.
    fn terminator(&self, op: &str, values: &[&Value]) -> Vec<String> {
        let types: Vec<String> = values.iter().map(|v| v.ty.to_string()).collect();
        let named: Vec<(&str, &str)> = values
            .iter()
            .zip(&types)
            .map(|(v, t)| (self.names[v.id as usize].as_str(), t.as_str()))
            .collect();
        mlir::generic_op("", op, &named, "", &[], Vec::new())
    }

    fn current_scope(&self) -> u32 {
        self.blocks.last().map_or(0, |b| b.scope)
    }

    fn current_block(&mut self) -> &mut Block {
        self.blocks
            .last_mut()
            .expect("the function body block is never popped")
    }
}

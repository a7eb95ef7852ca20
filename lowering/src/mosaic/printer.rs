//! The Mosaic printer: SSA naming and nested blocks over the MLIR text layer's generic-op
//! form (`%3 = "arith.addf"(%1, %2) : (f32, f32) -> f32`), the only form Mosaic's serialized
//! text allows (ops are renamed `stable_mosaic.<dialect>.<op>`); the readable form is the
//! same text without the `stable_mosaic.` prefix.

use crate::ir::Loc;
use crate::mlir;

/// Which spelling of op names to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// What Mosaic deserializes: `"stable_mosaic.arith.addf"`.
    Serialized,
    /// Plain dialect names, `"arith.addf"`: what `tessera lower --target mosaic` shows.
    Readable,
}

/// A printed SSA value: its name and its MLIR type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct V {
    pub name: String,
    pub ty: String,
}

/// Prints ops into nested blocks; every value gets a fresh, module-unique name.
pub(crate) struct Printer {
    flavor: Flavor,
    next: usize,
    /// The open blocks; ops go to the last. Each is a list of lines, unindented.
    blocks: Vec<Vec<String>>,
    /// The arguments of each open region block (the function body has none here).
    block_args: Vec<Vec<(String, String)>>,
    /// The user's location printed after each op (`loc(..)`); None prints none.
    loc: Option<Loc>,
}

impl Printer {
    pub fn new(flavor: Flavor) -> Printer {
        Printer {
            flavor,
            next: 0,
            blocks: vec![Vec::new()],
            block_args: Vec::new(),
            loc: None,
        }
    }

    /// Sets the location of the ops printed next; returns the previous one (to restore after
    /// an op whose regions print ops of their own locations).
    pub fn set_loc(&mut self, loc: Option<Loc>) -> Option<Loc> {
        std::mem::replace(&mut self.loc, loc)
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    pub fn fresh(&mut self, ty: String) -> V {
        self.next += 1;
        V {
            name: format!("%{}", self.next - 1),
            ty,
        }
    }

    /// The op name in this flavor.
    fn op_name(&self, name: &str) -> String {
        match self.flavor {
            Flavor::Serialized => format!("stable_mosaic.{name}"),
            Flavor::Readable => name.to_string(),
        }
    }

    /// Emits `name(operands) {attrs} : (types) -> (results)` and returns the results.
    pub fn op(&mut self, name: &str, operands: &[&V], attrs: &str, results: &[String]) -> Vec<V> {
        self.op_with_regions(name, operands, attrs, results, Vec::new())
    }

    /// Like [`op`](Self::op) with exactly one result.
    pub fn op1(&mut self, name: &str, operands: &[&V], attrs: &str, result: String) -> V {
        let v = self.fresh(result);
        let head = format!("{} = ", v.name);
        self.print(
            &head,
            name,
            operands,
            attrs,
            std::slice::from_ref(&v.ty),
            Vec::new(),
        );
        v
    }

    /// Emits an op with regions (each a rendered block from [`end_block`](Self::end_block)).
    pub fn op_with_regions(
        &mut self,
        name: &str,
        operands: &[&V],
        attrs: &str,
        results: &[String],
        regions: Vec<Vec<String>>,
    ) -> Vec<V> {
        let (head, values) = match results {
            [] => (String::new(), Vec::new()),
            [one] => {
                let v = self.fresh(one.clone());
                (format!("{} = ", v.name), vec![v])
            }
            many => {
                let base = self.fresh(String::new()).name;
                let vs = many
                    .iter()
                    .enumerate()
                    .map(|(i, t)| V {
                        name: format!("{base}#{i}"),
                        ty: t.clone(),
                    })
                    .collect();
                (format!("{base}:{} = ", many.len()), vs)
            }
        };
        self.print(&head, name, operands, attrs, results, regions);
        values
    }

    /// `head "name"(operands) ({regions}) {attrs} : (types) -> results`.
    fn print(
        &mut self,
        head: &str,
        name: &str,
        operands: &[&V],
        attrs: &str,
        results: &[String],
        regions: Vec<Vec<String>>,
    ) {
        let operands: Vec<(&str, &str)> = operands
            .iter()
            .map(|o| (o.name.as_str(), o.ty.as_str()))
            .collect();
        let name = self.op_name(name);
        let mut lines = mlir::generic_op(head, &name, &operands, attrs, results, regions);
        mlir::loc::attach(&mut lines, self.loc);
        self.current().extend(lines);
    }

    /// Opens a block (a region's body); `args` become its `^bb0(..)` arguments.
    pub fn begin_block(&mut self, args: &[V]) {
        self.block_args.push(
            args.iter()
                .map(|v| (v.name.clone(), v.ty.clone()))
                .collect(),
        );
        self.blocks.push(Vec::new());
    }

    /// Closes the innermost block and returns its lines (ops indented under `^bb0`).
    pub fn end_block(&mut self) -> Vec<String> {
        let ops = self.blocks.pop().unwrap_or_default();
        let args = self.block_args.pop().unwrap_or_default();
        mlir::block(&args, ops)
    }

    fn current(&mut self) -> &mut Vec<String> {
        if self.blocks.is_empty() {
            self.blocks.push(Vec::new());
        }
        let last = self.blocks.len() - 1;
        &mut self.blocks[last]
    }

    /// The top-level lines printed so far.
    pub fn finish(mut self) -> Vec<String> {
        self.blocks.truncate(1);
        self.blocks.pop().unwrap_or_default()
    }
}

pub(crate) use crate::mlir::result_types;

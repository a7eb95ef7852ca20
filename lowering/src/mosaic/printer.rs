//! A small printer of MLIR's generic op form (`%3 = "arith.addf"(%1, %2) : (f32, f32) -> f32`).
//! Generic form is the only form Mosaic's serialized text allows (ops are renamed
//! `stable_mosaic.<dialect>.<op>`), and printing every op the same way keeps this tiny; the
//! readable form is the same text without the `stable_mosaic.` prefix.

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
}

impl Printer {
    pub fn new(flavor: Flavor) -> Printer {
        Printer {
            flavor,
            next: 0,
            blocks: vec![Vec::new()],
        }
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

    /// The quoted op name in this flavor.
    fn op_name(&self, name: &str) -> String {
        match self.flavor {
            Flavor::Serialized => format!("\"stable_mosaic.{name}\""),
            Flavor::Readable => format!("\"{name}\""),
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
        let names: Vec<&str> = operands.iter().map(|o| o.name.as_str()).collect();
        let types: Vec<&str> = operands.iter().map(|o| o.ty.as_str()).collect();
        let mut line = format!("{head}{}({})", self.op_name(name), names.join(", "));
        let mut lines = Vec::new();
        // Regions print as `({ ... }, { ... })` between the operands and the attributes.
        for (i, region) in regions.into_iter().enumerate() {
            lines.push(line + if i == 0 { " ({" } else { "}, {" });
            lines.extend(region);
            line = String::new();
        }
        if !lines.is_empty() {
            line = "})".to_string();
        }
        if !attrs.is_empty() {
            line += &format!(" {{{attrs}}}");
        }
        line += &format!(" : ({}) -> {}", types.join(", "), result_types(results));
        lines.push(line);
        self.current().extend(lines);
    }

    /// Opens a block (a region's body); `args` become its `^bb0(..)` arguments.
    pub fn begin_block(&mut self, args: &[V]) {
        let mut block = Vec::new();
        if !args.is_empty() {
            let a: Vec<String> = args
                .iter()
                .map(|v| format!("{}: {}", v.name, v.ty))
                .collect();
            block.push(format!("^bb0({}):", a.join(", ")));
        }
        self.blocks.push(block);
    }

    /// Closes the innermost block and returns its lines (ops indented under `^bb0`).
    pub fn end_block(&mut self) -> Vec<String> {
        let block = self.blocks.pop().unwrap_or_default();
        block
            .into_iter()
            .map(|l| {
                if l.starts_with("^bb") {
                    l
                } else {
                    format!("  {l}")
                }
            })
            .collect()
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

/// `f32`, `()`, or `(f32, i32)`.
pub(crate) fn result_types(results: &[String]) -> String {
    match results {
        [one] => one.clone(),
        many => format!("({})", many.join(", ")),
    }
}

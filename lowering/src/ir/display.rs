//! The readable text dump, MLIR-flavoured, one op per line with its source location.

use super::func::Func;
use super::op::{Offset, OpKind, Operation, Region, ValueId};
use std::fmt::{self, Write};

impl fmt::Display for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = self
            .params()
            .iter()
            .map(|p| format!("{p}: {}", self.ty(*p)))
            .collect();
        write!(f, "func @{}({})", self.name, params.join(", "))?;
        if !self.results().is_empty() {
            let results: Vec<String> = self.result_types().iter().map(|t| t.to_string()).collect();
            write!(f, " -> ({})", results.join(", "))?;
        }
        writeln!(f, " {{  // {}", self.loc)?;
        let mut out = String::new();
        Printer {
            func: self,
            out: &mut out,
        }
        .region_body(&self.body, 1, "return")?;
        f.write_str(&out)?;
        writeln!(f, "}}")
    }
}

struct Printer<'a> {
    func: &'a Func,
    out: &'a mut String,
}

fn list(vs: &[ValueId]) -> String {
    vs.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn offsets(os: &[Offset]) -> String {
    os.iter()
        .map(|o| o.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Printer<'_> {
    fn region_body(&mut self, r: &Region, depth: usize, terminator: &str) -> fmt::Result {
        for op in &r.ops {
            self.op(op, depth)?;
        }
        let pad = "  ".repeat(depth);
        match (r.yields.is_empty(), terminator) {
            (false, _) => writeln!(self.out, "{pad}{terminator} {}", list(&r.yields))?,
            (true, "yield") => writeln!(self.out, "{pad}yield")?,
            (true, _) => {}
        }
        Ok(())
    }

    fn op(&mut self, op: &Operation, depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        write!(self.out, "{pad}")?;
        if !op.results.is_empty() {
            write!(self.out, "{} = ", list(&op.results))?;
        }
        let name = op.kind.name();
        let operands = list(&op.kind.operands());
        match &op.kind {
            OpKind::Constant { value } => write!(self.out, "constant {value}")?,
            OpKind::ProgramId { axis } | OpKind::NumPrograms { axis } => {
                write!(self.out, "{name} {axis}")?
            }
            OpKind::Iota { dim } => write!(self.out, "iota dim {dim}")?,
            OpKind::LoadSlice { src, starts, sizes } => write!(
                self.out,
                "load_slice {src}[{}] sizes {sizes:?}",
                offsets(starts)
            )?,
            OpKind::StoreSlice { dst, starts, value } => write!(
                self.out,
                "store_slice {value} -> {dst}[{}]",
                offsets(starts)
            )?,
            OpKind::LoadElement { src, indices } => {
                write!(self.out, "load_element {src}[{}]", offsets(indices))?
            }
            OpKind::StoreElement {
                dst,
                indices,
                value,
            } => write!(
                self.out,
                "store_element {value} -> {dst}[{}]",
                offsets(indices)
            )?,
            OpKind::Broadcast { x, dims } => write!(self.out, "broadcast {x} dims {dims:?}")?,
            OpKind::AssumeMultiple { x, multiple } => {
                write!(self.out, "multiple_of {x} {multiple}")?
            }
            OpKind::Transpose { x, perm } => write!(self.out, "transpose {x} perm {perm:?}")?,
            OpKind::Slice { x, starts, strides } => {
                write!(self.out, "slice {x} starts {starts:?} strides {strides:?}")?
            }
            OpKind::Reduce {
                x, axes, keepdims, ..
            } => write!(
                self.out,
                "{name} {x} axes {axes:?}{}",
                if *keepdims { " keepdims" } else { "" }
            )?,
            OpKind::Scan { x, axis, .. } => write!(self.out, "{name} {x} axis {axis}")?,
            OpKind::Dot {
                lhs,
                rhs,
                transpose_lhs,
                transpose_rhs,
            } => {
                let t = |b: bool| if b { "^T" } else { "" };
                write!(
                    self.out,
                    "dot {lhs}{}, {rhs}{}",
                    t(*transpose_lhs),
                    t(*transpose_rhs)
                )?
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => {
                writeln!(self.out, "if {cond} {{  // {}", op.loc)?;
                self.region_body(then_region, depth + 1, "yield")?;
                writeln!(self.out, "{pad}}} else {{")?;
                self.region_body(else_region, depth + 1, "yield")?;
                return self.close(op, &pad);
            }
            OpKind::Fori { lo, hi, init, body } => {
                writeln!(
                    self.out,
                    "fori {lo} to {hi} iter({}) ^({}) {{  // {}",
                    list(init),
                    list(&body.args),
                    op.loc
                )?;
                self.region_body(body, depth + 1, "yield")?;
                return self.close(op, &pad);
            }
            OpKind::While { init, cond, body } => {
                writeln!(
                    self.out,
                    "while iter({}) ^({}) {{  // {}",
                    list(init),
                    list(&cond.args),
                    op.loc
                )?;
                self.region_body(cond, depth + 1, "condition")?;
                writeln!(self.out, "{pad}}} do ^({}) {{", list(&body.args))?;
                self.region_body(body, depth + 1, "yield")?;
                return self.close(op, &pad);
            }
            OpKind::RunScoped { body } => {
                writeln!(
                    self.out,
                    "run_scoped ^({}) {{  // {}",
                    list(&body.args),
                    op.loc
                )?;
                self.region_body(body, depth + 1, "yield")?;
                return self.close(op, &pad);
            }
            OpKind::DmaStart(c) | OpKind::DmaWait(c) => {
                let at = |o: &[Offset]| o.iter().map(|o| o.to_string()).collect::<Vec<_>>();
                write!(
                    self.out,
                    "{name} {}[{}] -> {}[{}] sizes {:?} sem {}[{}]",
                    c.src,
                    at(&c.src_starts).join(", "),
                    c.dst,
                    at(&c.dst_starts).join(", "),
                    c.sizes,
                    c.sem,
                    c.sem_index
                )?
            }
            OpKind::PrngRandomBits { key, site } => {
                write!(self.out, "prng_random_bits key {key} site {site}")?
            }
            _ => write!(self.out, "{name} {operands}")?,
        }
        self.types(op)?;
        writeln!(self.out, "  // {}", op.loc)
    }

    fn close(&mut self, op: &Operation, pad: &str) -> fmt::Result {
        write!(self.out, "{pad}}}")?;
        self.types(op)?;
        writeln!(self.out)
    }

    fn types(&mut self, op: &Operation) -> fmt::Result {
        if !op.results.is_empty() {
            let ts: Vec<String> = op
                .results
                .iter()
                .map(|r| self.func.ty(*r).to_string())
                .collect();
            write!(self.out, " : {}", ts.join(", "))?;
        }
        Ok(())
    }
}

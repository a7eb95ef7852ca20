//! A structural hash of IR that is stable across runs, platforms and compiler versions
//! (it keys on-disk caches), independent of value numbering and source locations.
//! FNV-1a over a canonical encoding; std's `DefaultHasher` promises no stability.

use super::func::Func;
use super::op::{Literal, Offset, OpKind, Region, ValueId};
use super::types::{MemorySpace, Type};
use std::collections::HashMap;

/// 64-bit FNV-1a.
#[derive(Clone, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    pub fn usize(&mut self, v: usize) {
        self.u64(v as u64);
    }
    /// Length-prefixed so that `("ab", "c")` and `("a", "bc")` differ.
    pub fn str(&mut self, s: &str) {
        self.usize(s.len());
        self.bytes(s.as_bytes());
    }
    pub fn dims(&mut self, dims: &[usize]) {
        self.usize(dims.len());
        dims.iter().for_each(|&d| self.usize(d));
    }
    pub fn ty(&mut self, t: &Type) {
        match t {
            Type::Value { dtype, shape } => {
                self.u64(0);
                self.str(dtype.name());
                self.dims(shape);
            }
            Type::Ref {
                dtype,
                shape,
                space,
            } => {
                self.u64(1);
                self.str(dtype.name());
                self.dims(shape);
                self.u64(match space {
                    MemorySpace::Any => 0,
                    MemorySpace::Vmem => 1,
                    MemorySpace::Smem => 2,
                    MemorySpace::Semaphore => 3,
                });
            }
        }
    }
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// Hash of a function's structure (its name included).
pub fn structural_hash(func: &Func) -> u64 {
    let mut h = Fnv1a::default();
    hash_func_into(func, &mut h);
    h.finish()
}

/// Feeds `func` into `h` (for hashes of larger things that contain functions).
pub fn hash_func_into(func: &Func, h: &mut Fnv1a) {
    let mut w = Walker {
        h,
        func,
        canon: HashMap::new(),
    };
    w.h.str(&func.name);
    w.region(&func.body);
}

struct Walker<'a> {
    h: &'a mut Fnv1a,
    func: &'a Func,
    /// Values renumbered in definition order, so numbering does not affect the hash.
    canon: HashMap<ValueId, u64>,
}

impl Walker<'_> {
    fn define(&mut self, v: ValueId) {
        let next = self.canon.len() as u64;
        self.canon.insert(v, next);
        self.h.ty(self.func.ty(v));
    }

    fn use_(&mut self, v: ValueId) {
        let c = self.canon.get(&v).copied().unwrap_or(u64::MAX);
        self.h.u64(c);
    }

    fn offsets(&mut self, offsets: &[Offset]) {
        self.h.usize(offsets.len());
        for o in offsets {
            match o {
                Offset::Static(s) => {
                    self.h.u64(0);
                    self.h.usize(*s);
                }
                Offset::Dynamic(v) => {
                    self.h.u64(1);
                    self.use_(*v);
                }
            }
        }
    }

    fn region(&mut self, r: &Region) {
        self.h.usize(r.args.len());
        r.args.iter().for_each(|&a| self.define(a));
        self.h.usize(r.ops.len());
        for op in &r.ops {
            self.h.str(op.kind.name());
            self.attributes(&op.kind);
            let operands = op.kind.operands();
            self.h.usize(operands.len());
            operands.iter().for_each(|&v| self.use_(v));
            for inner in op.kind.regions() {
                self.region(inner);
            }
            self.h.usize(op.results.len());
            op.results.iter().for_each(|&v| self.define(v));
        }
        self.h.usize(r.yields.len());
        r.yields.iter().for_each(|&v| self.use_(v));
    }

    /// Everything about an op that is not an operand, a region or a result type.
    fn attributes(&mut self, kind: &OpKind) {
        let h = &mut *self.h;
        match kind {
            OpKind::Constant { value } => match value {
                Literal::Bool(b) => {
                    h.u64(0);
                    h.u64(u64::from(*b));
                }
                Literal::Int(i) => {
                    h.u64(1);
                    h.u64(*i as u64);
                }
                Literal::Float(x) => {
                    h.u64(2);
                    h.u64(x.to_bits());
                }
            },
            OpKind::ProgramId { axis }
            | OpKind::NumPrograms { axis }
            | OpKind::Iota { dim: axis }
            | OpKind::Scan { axis, .. } => h.usize(*axis),
            OpKind::LoadSlice { starts, sizes, .. } => {
                h.dims(sizes);
                self.offsets(starts);
            }
            OpKind::StoreSlice { starts, .. } => self.offsets(starts),
            OpKind::LoadElement { indices, .. } | OpKind::StoreElement { indices, .. } => {
                self.offsets(indices)
            }
            OpKind::Broadcast { dims, .. } => h.dims(dims),
            OpKind::AssumeMultiple { multiple, .. } => h.usize(*multiple),
            OpKind::Transpose { perm, .. } => h.dims(perm),
            OpKind::Slice {
                starts, strides, ..
            } => {
                h.dims(starts);
                h.dims(strides);
            }
            OpKind::Reduce { axes, keepdims, .. } => {
                h.dims(axes);
                h.u64(u64::from(*keepdims));
            }
            OpKind::Dot {
                transpose_lhs,
                transpose_rhs,
                ..
            } => {
                h.u64(u64::from(*transpose_lhs));
                h.u64(u64::from(*transpose_rhs));
            }
            OpKind::DmaStart(c) | OpKind::DmaWait(c) => {
                h.dims(&c.sizes);
                self.offsets(&c.src_starts);
                self.offsets(&c.dst_starts);
                self.offsets(std::slice::from_ref(&c.sem_index));
            }
            OpKind::PrngRandomBits { site, .. } => h.u64(u64::from(*site)),
            // The rest is fully described by name, operands and result types.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv1a;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        let hash = |s: &str| {
            let mut h = Fnv1a::default();
            h.bytes(s.as_bytes());
            h.finish()
        };
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }
}

//! Control flow the macro rewrites into builder calls: `if`/`else` with results and loops
//! with carried values. A Rust-`bool` condition runs one branch at trace time; a traced one
//! records an `if` op. Values a construct assigns travel through `Carry`.

use super::builder::{with, Val};
use super::element::Element;
use super::error::TraceError;
use super::index::{IndexValue, IntoIndex};
use super::refs::Scratch;
use super::value::{Scalar, Tile, Traced};
use crate::ir::{Loc, OpKind, Type};

/// One flattened carried value.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CarryLeaf {
    Traced(Val),
    /// A Rust value, kept to check that traced control flow does not change it.
    Rust(RustValue),
}

#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RustValue {
    Bool(bool),
    Int(i128),
    /// Bits, so NaN equals itself.
    Float(u64),
}

/// Values that can flow out of an `if` or through a loop: tracer values, Rust scalars, and
/// tuples (up to 12) and arrays of them.
pub trait Carry: Sized {
    #[doc(hidden)]
    fn flatten(self, out: &mut Vec<CarryLeaf>);
    /// Rebuilds from leaves in `flatten`'s order.
    #[doc(hidden)]
    fn unflatten(leaves: &mut dyn Iterator<Item = CarryLeaf>) -> Self;
}

impl Carry for () {
    fn flatten(self, _: &mut Vec<CarryLeaf>) {}
    fn unflatten(_: &mut dyn Iterator<Item = CarryLeaf>) -> Self {}
}

// A poisoned leaf (never produced by the builder) becomes a handle that fails on use.
const POISON: Val = Val {
    trace: 0,
    id: crate::ir::ValueId(u32::MAX),
};

macro_rules! carry_traced {
    ($($T:ident),*) => {$(
        impl<E: Element> Carry for $T<E> {
            fn flatten(self, out: &mut Vec<CarryLeaf>) {
                out.push(CarryLeaf::Traced(self.val()));
            }
            fn unflatten(leaves: &mut dyn Iterator<Item = CarryLeaf>) -> Self {
                match leaves.next() {
                    Some(CarryLeaf::Traced(v)) => $T::from_val(v),
                    _ => $T::from_val(POISON),
                }
            }
        }
    )*};
}
carry_traced!(Tile, Scalar);

macro_rules! carry_rust {
    ($variant:ident, |$x:ident| $to:expr, |$r:ident| $from:expr; $($t:ty),*) => {$(
        impl Carry for $t {
            fn flatten(self, out: &mut Vec<CarryLeaf>) {
                let $x = self;
                out.push(CarryLeaf::Rust(RustValue::$variant($to)));
            }
            fn unflatten(leaves: &mut dyn Iterator<Item = CarryLeaf>) -> Self {
                match leaves.next() {
                    Some(CarryLeaf::Rust(RustValue::$variant($r))) => $from,
                    _ => Default::default(),
                }
            }
        }
    )*};
}
carry_rust!(Bool, |x| x, |r| r; bool);
carry_rust!(Int, |x| x as i128, |r| r as _; i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);
carry_rust!(Float, |x| (x as f64).to_bits(), |r| f64::from_bits(r) as _; f32, f64);

impl<C: Carry, const N: usize> Carry for [C; N] {
    fn flatten(self, out: &mut Vec<CarryLeaf>) {
        self.into_iter().for_each(|c| c.flatten(out));
    }
    fn unflatten(leaves: &mut dyn Iterator<Item = CarryLeaf>) -> Self {
        std::array::from_fn(|_| C::unflatten(leaves))
    }
}

macro_rules! carry_tuple {
    ($($C:ident),+) => {
        impl<$($C: Carry),+> Carry for ($($C,)+) {
            #[allow(non_snake_case)]
            fn flatten(self, out: &mut Vec<CarryLeaf>) {
                let ($($C,)+) = self;
                $($C.flatten(out);)+
            }
            fn unflatten(leaves: &mut dyn Iterator<Item = CarryLeaf>) -> Self {
                ($($C::unflatten(leaves),)+)
            }
        }
    };
}
carry_tuple!(A);
carry_tuple!(A, B);
carry_tuple!(A, B, C);
carry_tuple!(A, B, C, D);
carry_tuple!(A, B, C, D, F);
carry_tuple!(A, B, C, D, F, G);
carry_tuple!(A, B, C, D, F, G, H);
carry_tuple!(A, B, C, D, F, G, H, I);
carry_tuple!(A, B, C, D, F, G, H, I, J);
carry_tuple!(A, B, C, D, F, G, H, I, J, K);
carry_tuple!(A, B, C, D, F, G, H, I, J, K, L);
carry_tuple!(A, B, C, D, F, G, H, I, J, K, L, M);

/// An `if` or `while` condition: a Rust `bool` (decided at trace time) or a traced
/// `Scalar<bool>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a condition: `if` and `while` take a `bool` or a traced `Scalar<bool>`",
    label = "not a scalar bool",
    note = "compare to get one, e.g. `n.gt(0)` or `i.lt(count)`; a tile of bools needs a reduction first"
)]
pub trait IntoCond {
    #[doc(hidden)]
    fn into_cond(self) -> Result<bool, Val>;
}
impl IntoCond for bool {
    fn into_cond(self) -> Result<bool, Val> {
        Ok(self)
    }
}
impl IntoCond for Scalar<bool> {
    fn into_cond(self) -> Result<bool, Val> {
        Err(self.val())
    }
}

fn flat<C: Carry>(c: C) -> Vec<CarryLeaf> {
    let mut out = Vec::new();
    c.flatten(&mut out);
    out
}

fn traced(leaves: &[CarryLeaf]) -> Vec<Val> {
    leaves
        .iter()
        .filter_map(|l| match l {
            CarryLeaf::Traced(v) => Some(*v),
            CarryLeaf::Rust(_) => None,
        })
        .collect()
}

/// Leaves of `template` with its traced leaves replaced, in order, by `vals`.
fn substitute(template: &[CarryLeaf], vals: &[Val]) -> Vec<CarryLeaf> {
    let mut vals = vals.iter();
    template
        .iter()
        .map(|l| match l {
            CarryLeaf::Traced(_) => CarryLeaf::Traced(vals.next().copied().unwrap_or(POISON)),
            rust => *rust,
        })
        .collect()
}

/// `if cond { then_ } else { else_ }` with carried values and a result (see
/// docs/macro-contract.md). Both branches are traced when `cond` is traced.
#[track_caller]
pub fn __if_else<C: Carry, R: Carry>(
    cond: impl IntoCond,
    carry: C,
    then_: impl FnOnce(C) -> (C, R),
    else_: impl FnOnce(C) -> (C, R),
) -> (C, R) {
    let loc = Loc::caller();
    let cond = match cond.into_cond() {
        Ok(true) => return then_(carry),
        Ok(false) => return else_(carry),
        Err(v) => v,
    };
    let leaves = flat(carry);
    let branch = |f: Box<dyn FnOnce(C) -> (C, R) + '_>| {
        with(|b| b.begin_region(vec![]));
        let out = flat(f(C::unflatten(&mut leaves.iter().copied())));
        let region = with(|b| b.end_region(&traced(&out), "if", loc));
        (out, region)
    };
    let (then_out, then_region) = branch(Box::new(then_));
    let (else_out, else_region) = branch(Box::new(else_));
    let results = with(|b| {
        for (i, (t, e)) in then_out.iter().zip(&else_out).enumerate() {
            let problem = match (t, e) {
                (CarryLeaf::Traced(t), CarryLeaf::Traced(e)) if b.ty(*t) != b.ty(*e) => Some(format!(
                    "value #{i} leaving the branches has type {} in `then` and {} in `else`",
                    b.ty(*t),
                    b.ty(*e)
                )),
                (CarryLeaf::Rust(t), CarryLeaf::Rust(e)) if t != e => Some(format!(
                    "value #{i} leaving the branches is a Rust value that differs between them ({t:?} vs {e:?}); \
                     a traced condition needs traced values (e.g. `full(shape, x)` or a `Scalar`)"
                )),
                _ => None,
            };
            if let Some(message) = problem {
                b.error(TraceError::NotTraced {
                    construct: "if",
                    message,
                    loc,
                });
            }
        }
        let types: Vec<Type> = traced(&then_out).iter().map(|v| b.ty(*v)).collect();
        let cond = b.id(cond, "if", loc);
        b.emit(
            OpKind::If {
                cond,
                then_region,
                else_region,
            },
            types,
            loc,
        )
    });
    let out = substitute(&then_out, &results);
    let mut it = out.into_iter();
    let c = C::unflatten(&mut it);
    (c, R::unflatten(&mut it))
}

/// `for i in lo..hi { body }` with carried values, traced once into a loop region.
#[track_caller]
pub fn __fori<C: Carry>(
    lo: impl IntoIndex,
    hi: impl IntoIndex,
    carry: C,
    body: impl FnOnce(Scalar<i32>, C) -> C,
) -> C {
    let loc = Loc::caller();
    let leaves = flat(carry);
    let init = traced(&leaves);
    let (lo, hi, init_types, args) = with(|b| {
        let bound = |b: &mut super::builder::Builder, i: IndexValue| {
            let v = i.to_val(b, loc);
            b.id(v, "fori", loc)
        };
        let (lo, hi) = (bound(b, lo.into_index()), bound(b, hi.into_index()));
        let init_types: Vec<Type> = init.iter().map(|v| b.ty(*v)).collect();
        let arg_types = std::iter::once(Type::index())
            .chain(init_types.iter().cloned())
            .collect();
        (lo, hi, init_types, b.begin_loop_region(arg_types))
    });
    let inner = substitute(&leaves, &args[1..]);
    let out = flat(body(
        Scalar::from_val(args[0]),
        C::unflatten(&mut inner.into_iter()),
    ));
    let results = with(|b| {
        check_carried(b, &leaves, &out, "for", loc);
        let region = b.end_region(&traced(&out), "fori", loc);
        let init: Vec<_> = init.iter().map(|v| b.id(*v, "fori", loc)).collect();
        b.emit(
            OpKind::Fori {
                lo,
                hi,
                init,
                body: region,
            },
            init_types,
            loc,
        )
    });
    C::unflatten(&mut substitute(&leaves, &results).into_iter())
}

/// Runs `body` only when `cond` holds (Pallas' `pl.when`): a traced `if` without results,
/// usable without the macro since nothing is carried.
#[track_caller]
pub fn when(cond: impl IntoCond, body: impl FnOnce()) {
    __if_else(cond, (), |()| ((), body()), |()| ((), ()));
}

/// `jax.lax.fori_loop`: `body(i, carry)` for `i` in `lo..hi`, traced once into a loop.
#[track_caller]
pub fn fori_loop<C: Carry>(
    lo: impl IntoIndex,
    hi: impl IntoIndex,
    init: C,
    body: impl FnOnce(Scalar<i32>, C) -> C,
) -> C {
    __fori(lo, hi, init, body)
}

/// Most trips a `while` with a Rust condition unrolls at trace time before it is reported.
const MAX_UNROLLED_TRIPS: usize = 1 << 16;

/// `while cond(carried) { carried = body(carried) }` (see docs/macro-contract.md). A Rust
/// `bool` condition runs the loop at trace time (unrolled, like a Rust loop); a traced
/// `Scalar<bool>` records a `while` op whose condition and body are regions traced once, so
/// the trip count may be data (e.g. read from SMEM).
#[track_caller]
pub fn __while<C: Carry, B: IntoCond>(
    carry: C,
    mut cond: impl FnMut(C) -> B,
    mut body: impl FnMut(C) -> C,
) -> C {
    let loc = Loc::caller();
    let leaves = flat(carry);
    let rebuild = |l: &[CarryLeaf]| C::unflatten(&mut l.iter().copied());
    let init = traced(&leaves);
    let init_types: Vec<Type> = with(|b| init.iter().map(|v| b.ty(*v)).collect());
    // The condition, on the carried values as region args.
    let cond_args = with(|b| b.begin_loop_region(init_types.clone()));
    let decided = cond(rebuild(&substitute(&leaves, &cond_args))).into_cond();
    let cond_value = match decided {
        Ok(go) => {
            // A Rust condition: drop the region (it computed nothing traced) and unroll.
            with(|b| b.end_region(&[], "while", loc));
            return unrolled(go, leaves, loc, &mut cond, &mut body);
        }
        Err(v) => v,
    };
    let cond_region = with(|b| {
        let region = b.end_region(&[cond_value], "while", loc);
        if writes_a_ref(&region) {
            b.error(TraceError::NotTraced {
                construct: "while",
                message: "its condition stores into a ref; compute the condition only and \
                          store in the body"
                    .into(),
                loc,
            });
        }
        region
    });
    let body_args = with(|b| b.begin_loop_region(init_types.clone()));
    let out = flat(body(rebuild(&substitute(&leaves, &body_args))));
    let results = with(|b| {
        check_carried(b, &leaves, &out, "while", loc);
        let region = b.end_region(&traced(&out), "while", loc);
        let init: Vec<_> = init.iter().map(|v| b.id(*v, "while", loc)).collect();
        b.emit(
            OpKind::While {
                init,
                cond: cond_region,
                body: region,
            },
            init_types,
            loc,
        )
    });
    C::unflatten(&mut substitute(&leaves, &results).into_iter())
}

/// The trace-time loop of a `while` whose condition is a Rust `bool` (`go` for the first
/// trip). Its condition must stay a Rust `bool`.
fn unrolled<C: Carry, B: IntoCond>(
    mut go: bool,
    mut leaves: Vec<CarryLeaf>,
    loc: Loc,
    cond: &mut impl FnMut(C) -> B,
    body: &mut impl FnMut(C) -> C,
) -> C {
    let rebuild = |l: &[CarryLeaf]| C::unflatten(&mut l.iter().copied());
    let mut trips = 0;
    while go {
        trips += 1;
        if trips > MAX_UNROLLED_TRIPS {
            with(|b| {
                b.error(TraceError::NotTraced {
                    construct: "while",
                    message: format!(
                        "its Rust condition stayed true for {MAX_UNROLLED_TRIPS} trips at trace \
                         time; a loop over data needs a traced condition (a `Scalar<bool>`)"
                    ),
                    loc,
                })
            });
            break;
        }
        leaves = flat(body(rebuild(&leaves)));
        go = match cond(rebuild(&leaves)).into_cond() {
            Ok(go) => go,
            Err(_) => {
                with(|b| {
                    b.error(TraceError::NotTraced {
                        construct: "while",
                        message: "its condition was a Rust `bool` on entry and became traced \
                                  in a later trip; make it traced from the start (e.g. carry \
                                  a `Scalar` counter)"
                            .into(),
                        loc,
                    })
                });
                false
            }
        };
    }
    rebuild(&leaves)
}

/// Whether any op in `region` (nested regions included) writes a ref.
fn writes_a_ref(region: &crate::ir::Region) -> bool {
    region.ops.iter().any(|op| {
        matches!(
            op.kind,
            OpKind::Store { .. }
                | OpKind::StoreMasked { .. }
                | OpKind::StoreSlice { .. }
                | OpKind::StoreElement { .. }
                | OpKind::DmaStart(_)
        ) || op.kind.regions().into_iter().any(writes_a_ref)
    })
}

/// Reports carried values whose type a loop body changes, and Rust values it changes.
fn check_carried(
    b: &mut super::builder::Builder,
    before: &[CarryLeaf],
    after: &[CarryLeaf],
    construct: &'static str,
    loc: Loc,
) {
    for (i, (x, y)) in before.iter().zip(after).enumerate() {
        let problem = match (x, y) {
            (CarryLeaf::Traced(x), CarryLeaf::Traced(y)) if b.ty(*x) != b.ty(*y) => Some(format!(
                "carried value #{i} enters the loop as {} and leaves the body as {}",
                b.ty(*x),
                b.ty(*y)
            )),
            (CarryLeaf::Rust(x), CarryLeaf::Rust(y)) if x != y => Some(format!(
                "carried value #{i} is a Rust value the loop body changes ({x:?} to {y:?}); \
                 a traced loop runs its body once at trace time, so carry a traced value instead"
            )),
            _ => None,
        };
        if let Some(message) = problem {
            b.error(TraceError::NotTraced {
                construct,
                message,
                loc,
            });
        }
    }
}

/// `jax.lax.while_loop`: `carry = body(carry)` while `cond(carry)` holds; with a traced
/// condition it is one loop in the kernel, run as many trips as the data says.
#[track_caller]
pub fn while_loop<C: Carry>(
    init: C,
    cond: impl FnMut(C) -> Scalar<bool>,
    body: impl FnMut(C) -> C,
) -> C {
    __while(init, cond, body)
}

/// Scratch for one scope (Pallas' `pl.run_scoped`): allocates the buffer `spec` describes
/// (`Vmem::<f32>::new(..)`, `Smem::<i32>::new(..)` or `DmaSemaphores::new(n)`) for the
/// duration of `body` only, and returns what `body` returns. Nest calls for several
/// buffers. The buffer's contents are undefined when the scope begins, and a DMA into or out
/// of it must be waited for before the scope ends.
#[track_caller]
pub fn run_scoped<E: Element, R: Carry>(
    spec: super::ScratchSpec,
    body: impl FnOnce(Scratch<E>) -> R,
) -> R {
    let loc = Loc::caller();
    if spec.dtype != E::DTYPE {
        with(|b| {
            b.op_error(
                "run_scoped",
                format!(
                    "the scoped buffer holds {} but the body takes `Scratch<{}>`",
                    spec.dtype,
                    E::DTYPE
                ),
                loc,
            )
        });
    }
    let ty = Type::Ref {
        dtype: spec.dtype,
        shape: spec.shape,
        space: spec.space,
    };
    let args = with(|b| b.begin_region(vec![ty]));
    let out = flat(body(Scratch::new(args[0])));
    let yields = traced(&out);
    let results = with(|b| {
        let body = b.end_region(&yields, "run_scoped", loc);
        let types: Vec<Type> = yields.iter().map(|v| b.ty(*v)).collect();
        b.emit(OpKind::RunScoped { body }, types, loc)
    });
    R::unflatten(&mut substitute(&out, &results).into_iter())
}

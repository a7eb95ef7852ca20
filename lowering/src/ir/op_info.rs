//! The op-info table: every elementwise and reduction op kind of the IR is defined here, once,
//! with what each backend needs to know about it (its IR name, its StableHLO op, its Mosaic
//! `arith`/`math` op per element kind, the element types it is defined on, and its cost
//! class). The verifier, the StableHLO translator, the Mosaic printer and the cost estimate
//! look ops up here instead of each keeping a parallel `match`.

use crate::dtype::DType;
use crate::stablehlo;

/// Which element types an op is defined on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Floats only (transcendentals, rounding).
    Float,
    /// Every numeric type (not bool).
    Numeric,
    /// Integers and bool (bitwise ops).
    Bits,
    /// Integers only (shifts).
    Int,
    /// Everything.
    Any,
}

impl Domain {
    pub fn admits(self, dtype: DType) -> bool {
        match self {
            Domain::Float => dtype.is_float(),
            Domain::Numeric => dtype != DType::Bool,
            Domain::Bits => dtype == DType::Bool || dtype.is_int(),
            Domain::Int => dtype.is_int(),
            Domain::Any => true,
        }
    }
}

/// What an op costs per element, for the `cost_estimate` XLA schedules with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CostClass {
    /// One flop per element.
    Elementwise,
    /// One flop and one transcendental per element.
    Transcendental,
}

/// The `arith`/`math` op of Mosaic per element kind (Mosaic's integer types are signless, so
/// the signed and unsigned forms differ by name); `None` where the kind has no such op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MosaicOps {
    pub float: Option<&'static str>,
    pub signed: Option<&'static str>,
    pub unsigned: Option<&'static str>,
}

impl MosaicOps {
    /// The op for elements of `dtype` (bool counts as unsigned).
    pub fn for_dtype(&self, dtype: DType) -> Option<&'static str> {
        if dtype.is_float() {
            self.float
        } else if dtype.is_signed_int() {
            self.signed
        } else {
            self.unsigned
        }
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo<S> {
    /// The op's name in the IR dump and in error messages.
    pub name: &'static str,
    /// The StableHLO op the translator emits.
    pub stablehlo: S,
    pub domain: Domain,
    pub cost: CostClass,
    /// The direct Mosaic op, where there is one (the Mosaic printer expands the others).
    pub mosaic: MosaicOps,
}

impl<S> OpInfo<S> {
    pub fn float_only(&self) -> bool {
        self.domain == Domain::Float
    }
}

/// `m!(float, signed, unsigned)`: a [`MosaicOps`] row; `-` for none.
macro_rules! m {
    (@one -) => { None };
    (@one $s:literal) => { Some($s) };
    ($f:tt, $s:tt, $u:tt) => {
        MosaicOps { float: m!(@one $f), signed: m!(@one $s), unsigned: m!(@one $u) }
    };
}

/// Defines an op enum and its table in one place: `Variant => "name", StableHloOp, Domain,
/// CostClass, (mosaic float, signed, unsigned)`.
macro_rules! op_table {
    ($(#[$meta:meta])* $name:ident: $shlo:ty {
        $($variant:ident => $text:literal, $hlo:expr, $domain:ident, $cost:ident, ($f:tt, $s:tt, $u:tt);)*
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// This op's row of the op-info table.
            pub fn info(self) -> OpInfo<$shlo> {
                match self {
                    $($name::$variant => OpInfo {
                        name: $text,
                        stablehlo: $hlo,
                        domain: Domain::$domain,
                        cost: CostClass::$cost,
                        mosaic: m!($f, $s, $u),
                    }),*
                }
            }

            pub fn name(self) -> &'static str {
                self.info().name
            }
        }
    };
}

use stablehlo::BinaryOp as HB;
use stablehlo::Comparison as HC;
use stablehlo::ReduceKind as HR;
use stablehlo::UnaryOp as HU;

op_table!(
    /// Elementwise functions of one operand. (`neg` of ints, `not` and `logistic` have no
    /// single Mosaic op: the printer expands them.)
    UnaryOp: HU {
        Neg => "neg", HU::Negate, Numeric, Elementwise, ("arith.negf", -, -);
        Abs => "abs", HU::Abs, Numeric, Elementwise, ("math.absf", "math.absi", "math.absi");
        Exp => "exp", HU::Exponential, Float, Transcendental, ("math.exp", -, -);
        Log => "log", HU::Log, Float, Transcendental, ("math.log", -, -);
        Tanh => "tanh", HU::Tanh, Float, Transcendental, ("math.tanh", -, -);
        Sqrt => "sqrt", HU::Sqrt, Float, Transcendental, ("math.sqrt", -, -);
        Rsqrt => "rsqrt", HU::Rsqrt, Float, Transcendental, ("math.rsqrt", -, -);
        Erf => "erf", HU::Erf, Float, Transcendental, ("math.erf", -, -);
        Sin => "sin", HU::Sine, Float, Transcendental, ("math.sin", -, -);
        Cos => "cos", HU::Cosine, Float, Transcendental, ("math.cos", -, -);
        Logistic => "logistic", HU::Logistic, Float, Transcendental, (-, -, -);
        Floor => "floor", HU::Floor, Float, Elementwise, ("math.floor", -, -);
        Ceil => "ceil", HU::Ceil, Float, Elementwise, ("math.ceil", -, -);
        Not => "not", HU::Not, Bits, Elementwise, (-, -, -);
    }
);

op_table!(
    /// Elementwise functions of two operands of one type.
    BinaryOp: HB {
        Add => "add", HB::Add, Numeric, Elementwise, ("arith.addf", "arith.addi", "arith.addi");
        Sub => "sub", HB::Subtract, Numeric, Elementwise, ("arith.subf", "arith.subi", "arith.subi");
        Mul => "mul", HB::Multiply, Numeric, Elementwise, ("arith.mulf", "arith.muli", "arith.muli");
        Div => "div", HB::Divide, Numeric, Elementwise, ("arith.divf", "arith.divsi", "arith.divui");
        Rem => "rem", HB::Remainder, Numeric, Elementwise, ("arith.remf", "arith.remsi", "arith.remui");
        Max => "max", HB::Maximum, Numeric, Elementwise, ("arith.maximumf", "arith.maxsi", "arith.maxui");
        Min => "min", HB::Minimum, Numeric, Elementwise, ("arith.minimumf", "arith.minsi", "arith.minui");
        Pow => "pow", HB::Power, Numeric, Elementwise, ("math.powf", "math.ipowi", "math.ipowi");
        And => "and", HB::And, Bits, Elementwise, (-, "arith.andi", "arith.andi");
        Or => "or", HB::Or, Bits, Elementwise, (-, "arith.ori", "arith.ori");
        Xor => "xor", HB::Xor, Bits, Elementwise, (-, "arith.xori", "arith.xori");
        // Shifts by an amount outside 0..bits give 0 (right arithmetic: the sign) as in
        // StableHLO; `arith` leaves them undefined, so the Mosaic printer guards them.
        Shl => "shift_left", HB::ShiftLeft, Int, Elementwise, (-, "arith.shli", "arith.shli");
        ShrArithmetic => "shift_right_arithmetic", HB::ShiftRightArithmetic, Int, Elementwise, (-, "arith.shrsi", "arith.shrsi");
        ShrLogical => "shift_right_logical", HB::ShiftRightLogical, Int, Elementwise, (-, "arith.shrui", "arith.shrui");
    }
);

op_table!(
    /// Elementwise comparisons; results are `bool`. The Mosaic column is `arith.cmpf`'s
    /// predicate (ordered compares; `!=` unordered, so NaN != NaN as in IEEE and JAX; libtpu
    /// has no unordered compares, so the Mosaic printer emits it as `!(==)`) and
    /// `arith.cmpi`'s signed and unsigned predicates, as numbers.
    CompareOp: HC {
        Eq => "eq", HC::Eq, Any, Elementwise, ("1", "0", "0");
        Ne => "ne", HC::Ne, Any, Elementwise, ("13", "1", "1");
        Lt => "lt", HC::Lt, Any, Elementwise, ("4", "2", "6");
        Le => "le", HC::Le, Any, Elementwise, ("5", "3", "7");
        Gt => "gt", HC::Gt, Any, Elementwise, ("2", "4", "8");
        Ge => "ge", HC::Ge, Any, Elementwise, ("3", "5", "9");
    }
);

op_table!(
    /// Reductions over axes (Mosaic: `vector.multi_reduction`'s combining kind).
    ReduceOp: HR {
        Sum => "sum", HR::Sum, Numeric, Elementwise, ("add", "add", "add");
        Max => "max", HR::Max, Numeric, Elementwise, ("maximumf", "maxsi", "maxui");
        Min => "min", HR::Min, Numeric, Elementwise, ("minimumf", "minsi", "minui");
    }
);

impl CompareOp {
    /// Whether `a op b` holds (ordered: a NaN makes all but `ne` false).
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
            CompareOp::Lt => a < b,
            CompareOp::Le => a <= b,
            CompareOp::Gt => a > b,
            CompareOp::Ge => a >= b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_consistent() {
        for u in UnaryOp::ALL {
            let i = u.info();
            // A float-only op has no integer Mosaic op.
            if i.float_only() {
                assert!(
                    i.mosaic.signed.is_none() && i.mosaic.unsigned.is_none(),
                    "{u:?}"
                );
            }
        }
        for b in BinaryOp::ALL {
            assert_eq!(
                matches!(b.info().domain, Domain::Bits | Domain::Int),
                b.info().mosaic.float.is_none()
            );
        }
        for c in CompareOp::ALL {
            let m = c.info().mosaic;
            for p in [m.float, m.signed, m.unsigned] {
                assert!(p.is_some_and(|p| p.parse::<u8>().is_ok()), "{c:?}");
            }
        }
        assert!(Domain::Bits.admits(DType::Bool) && !Domain::Bits.admits(DType::F32));
        assert!(!Domain::Numeric.admits(DType::Bool));
        assert!(Domain::Int.admits(DType::U32) && !Domain::Int.admits(DType::Bool));
    }
}

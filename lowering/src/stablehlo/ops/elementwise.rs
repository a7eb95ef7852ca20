//! Elementwise ops: unary math, binary arithmetic/logic, compare, select, clamp, convert.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::{TensorType, Value};
use crate::dtype::DType;

/// What element types an op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Accepts {
    /// Real floats only (floor, ceil, is_finite, the CHLO special functions).
    Float,
    /// Floats and complex (exp, log, sqrt, trig: the spec's "floating-point or complex").
    FloatOrComplex,
    /// Floats, signed integers and complex (abs, negate, sign).
    Signed,
    /// Floats, integers and complex, not bool (subtract, divide, power).
    Numeric,
    /// Floats and integers, not bool or complex (remainder).
    RealNumeric,
    /// Anything but complex (maximum, minimum: complex numbers have no order).
    Ordered,
    /// Integers and bool (bitwise logic).
    IntOrBool,
    /// Integers only (shifts, popcnt).
    Int,
}

impl Accepts {
    fn check(self, op: &'static str, d: DType) -> Result<(), BuildError> {
        let (ok, expected) = match self {
            Accepts::Float => (d.is_float(), "a float type"),
            Accepts::FloatOrComplex => (d.is_float() || d.is_complex(), "a float or complex type"),
            Accepts::Signed => (
                d.is_float() || d.is_signed_int() || d.is_complex(),
                "a float, signed integer or complex type",
            ),
            Accepts::Numeric => (d != DType::Bool, "a numeric type (not bool)"),
            Accepts::RealNumeric => (
                d.is_float() || d.is_int(),
                "a real numeric type (not bool or complex)",
            ),
            Accepts::Ordered => (!d.is_complex(), "a real type (not complex)"),
            Accepts::IntOrBool => (d.is_int() || d == DType::Bool, "an integer or bool type"),
            Accepts::Int => (d.is_int(), "an integer type"),
        };
        if ok {
            Ok(())
        } else {
            Err(BuildError::UnsupportedDType {
                op,
                dtype: d,
                expected,
            })
        }
    }
}

/// Unary elementwise ops. `Erf`..`Atanh` are CHLO ops, which XLA decomposes when it compiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Abs,
    Negate,
    Sign,
    Exponential,
    ExponentialMinusOne,
    Log,
    LogPlusOne,
    Logistic,
    Tanh,
    Sqrt,
    Rsqrt,
    Cbrt,
    Sine,
    Cosine,
    Tan,
    Floor,
    Ceil,
    RoundNearestEven,
    RoundNearestAfz,
    Not,
    PopulationCount,
    Erf,
    /// `1 - erf(x)`, accurate where `erf(x)` is close to 1.
    Erfc,
    ErfInv,
    Lgamma,
    Digamma,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
}

impl UnaryOp {
    pub fn op_name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Abs => "stablehlo.abs",
            Negate => "stablehlo.negate",
            Sign => "stablehlo.sign",
            Exponential => "stablehlo.exponential",
            ExponentialMinusOne => "stablehlo.exponential_minus_one",
            Log => "stablehlo.log",
            LogPlusOne => "stablehlo.log_plus_one",
            Logistic => "stablehlo.logistic",
            Tanh => "stablehlo.tanh",
            Sqrt => "stablehlo.sqrt",
            Rsqrt => "stablehlo.rsqrt",
            Cbrt => "stablehlo.cbrt",
            Sine => "stablehlo.sine",
            Cosine => "stablehlo.cosine",
            Tan => "stablehlo.tan",
            Floor => "stablehlo.floor",
            Ceil => "stablehlo.ceil",
            RoundNearestEven => "stablehlo.round_nearest_even",
            RoundNearestAfz => "stablehlo.round_nearest_afz",
            Not => "stablehlo.not",
            PopulationCount => "stablehlo.popcnt",
            Erf => "chlo.erf",
            Erfc => "chlo.erfc",
            ErfInv => "chlo.erf_inv",
            Lgamma => "chlo.lgamma",
            Digamma => "chlo.digamma",
            Asin => "chlo.asin",
            Acos => "chlo.acos",
            Atan => "chlo.atan",
            Sinh => "chlo.sinh",
            Cosh => "chlo.cosh",
            Asinh => "chlo.asinh",
            Acosh => "chlo.acosh",
            Atanh => "chlo.atanh",
        }
    }

    fn accepts(self) -> Accepts {
        use UnaryOp::*;
        match self {
            Abs | Negate | Sign => Accepts::Signed,
            Not => Accepts::IntOrBool,
            PopulationCount => Accepts::Int,
            Exponential | ExponentialMinusOne | Log | LogPlusOne | Logistic | Tanh | Sqrt
            | Rsqrt | Cbrt | Sine | Cosine | Tan => Accepts::FloatOrComplex,
            _ => Accepts::Float,
        }
    }
}

/// Binary elementwise ops on two operands of the same type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Remainder,
    Power,
    Maximum,
    Minimum,
    Atan2,
    And,
    Or,
    Xor,
    ShiftLeft,
    ShiftRightArithmetic,
    ShiftRightLogical,
}

impl BinaryOp {
    pub fn op_name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "stablehlo.add",
            Subtract => "stablehlo.subtract",
            Multiply => "stablehlo.multiply",
            Divide => "stablehlo.divide",
            Remainder => "stablehlo.remainder",
            Power => "stablehlo.power",
            Maximum => "stablehlo.maximum",
            Minimum => "stablehlo.minimum",
            Atan2 => "stablehlo.atan2",
            And => "stablehlo.and",
            Or => "stablehlo.or",
            Xor => "stablehlo.xor",
            ShiftLeft => "stablehlo.shift_left",
            ShiftRightArithmetic => "stablehlo.shift_right_arithmetic",
            ShiftRightLogical => "stablehlo.shift_right_logical",
        }
    }

    fn accepts(self) -> Option<Accepts> {
        use BinaryOp::*;
        match self {
            // add/multiply/max/min on i1 are or/and/or/and in StableHLO: legal, so no check.
            Add | Multiply => None,
            Maximum | Minimum => Some(Accepts::Ordered),
            Subtract | Divide | Power => Some(Accepts::Numeric),
            Remainder => Some(Accepts::RealNumeric),
            Atan2 => Some(Accepts::Float),
            And | Or | Xor => Some(Accepts::IntOrBool),
            ShiftLeft | ShiftRightArithmetic | ShiftRightLogical => Some(Accepts::Int),
        }
    }
}

/// `comparison_direction` of `stablehlo.compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Comparison {
    fn keyword(self) -> &'static str {
        match self {
            Comparison::Eq => "EQ",
            Comparison::Ne => "NE",
            Comparison::Lt => "LT",
            Comparison::Le => "LE",
            Comparison::Gt => "GT",
            Comparison::Ge => "GE",
        }
    }
}

impl FuncBuilder {
    /// A unary op; the result has `x`'s type, except `abs` of a complex tensor, which is
    /// real (its component type).
    pub fn unary(&mut self, op: UnaryOp, x: &Value) -> Result<Value, BuildError> {
        op.accepts().check(op.op_name(), x.dtype())?;
        let ty = if op == UnaryOp::Abs {
            x.ty.with_dtype(x.dtype().component())
        } else {
            x.ty.clone()
        };
        self.emit1(op.op_name(), &[x], "", ty)
    }

    /// `complex(re, im)`: two f32 (f64) tensors of one type -> c64 (c128).
    pub fn complex(&mut self, re: &Value, im: &Value) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.complex";
        if re.ty != im.ty {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: re.ty.clone(),
                rhs: im.ty.clone(),
            });
        }
        let out = match re.dtype() {
            DType::F32 => DType::C64,
            DType::F64 => DType::C128,
            d => {
                return Err(BuildError::UnsupportedDType {
                    op: OP,
                    dtype: d,
                    expected: "f32 or f64",
                })
            }
        };
        self.emit1(OP, &[re, im], "", re.ty.with_dtype(out))
    }

    /// The real part of a complex tensor (its component type); a float tensor is its own.
    pub fn real(&mut self, x: &Value) -> Result<Value, BuildError> {
        self.part("stablehlo.real", x)
    }

    /// The imaginary part of a complex tensor (its component type); zeros for a float one.
    pub fn imag(&mut self, x: &Value) -> Result<Value, BuildError> {
        self.part("stablehlo.imag", x)
    }

    fn part(&mut self, op: &'static str, x: &Value) -> Result<Value, BuildError> {
        Accepts::FloatOrComplex.check(op, x.dtype())?;
        self.emit1(op, &[x], "", x.ty.with_dtype(x.dtype().component()))
    }

    /// `is_finite(x)`: i1 of x's shape.
    pub fn is_finite(&mut self, x: &Value) -> Result<Value, BuildError> {
        Accepts::Float.check("stablehlo.is_finite", x.dtype())?;
        self.emit1(
            "stablehlo.is_finite",
            &[x],
            "",
            x.ty.with_dtype(DType::Bool),
        )
    }

    /// A binary op on operands of identical type (use [`FuncBuilder::broadcast_binary`] for
    /// NumPy-style implicit broadcasting).
    pub fn binary(&mut self, op: BinaryOp, a: &Value, b: &Value) -> Result<Value, BuildError> {
        let name = op.op_name();
        if a.ty != b.ty {
            return Err(BuildError::TypeMismatch {
                op: name,
                lhs: a.ty.clone(),
                rhs: b.ty.clone(),
            });
        }
        if let Some(acc) = op.accepts() {
            acc.check(name, a.dtype())?;
        }
        self.emit1(name, &[a, b], "", a.ty.clone())
    }

    pub fn add(&mut self, a: &Value, b: &Value) -> Result<Value, BuildError> {
        self.binary(BinaryOp::Add, a, b)
    }
    pub fn sub(&mut self, a: &Value, b: &Value) -> Result<Value, BuildError> {
        self.binary(BinaryOp::Subtract, a, b)
    }
    pub fn mul(&mut self, a: &Value, b: &Value) -> Result<Value, BuildError> {
        self.binary(BinaryOp::Multiply, a, b)
    }
    pub fn div(&mut self, a: &Value, b: &Value) -> Result<Value, BuildError> {
        self.binary(BinaryOp::Divide, a, b)
    }
    pub fn max(&mut self, a: &Value, b: &Value) -> Result<Value, BuildError> {
        self.binary(BinaryOp::Maximum, a, b)
    }
    pub fn min(&mut self, a: &Value, b: &Value) -> Result<Value, BuildError> {
        self.binary(BinaryOp::Minimum, a, b)
    }
    pub fn exp(&mut self, x: &Value) -> Result<Value, BuildError> {
        self.unary(UnaryOp::Exponential, x)
    }
    pub fn neg(&mut self, x: &Value) -> Result<Value, BuildError> {
        self.unary(UnaryOp::Negate, x)
    }

    /// `compare(a, b)` -> i1. Floats compare as FLOAT (IEEE: NaN unordered), signed ints as
    /// SIGNED, unsigned ints and bool as UNSIGNED.
    pub fn compare(&mut self, dir: Comparison, a: &Value, b: &Value) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.compare";
        if a.ty != b.ty {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: a.ty.clone(),
                rhs: b.ty.clone(),
            });
        }
        if a.dtype().is_complex() && !matches!(dir, Comparison::Eq | Comparison::Ne) {
            return Err(BuildError::UnsupportedDType {
                op: OP,
                dtype: a.dtype(),
                expected: "an ordered (real) type: complex tensors compare with EQ and NE only",
            });
        }
        let kind = match a.dtype() {
            d if d.is_float() || d.is_complex() => "FLOAT",
            d if d.is_signed_int() => "SIGNED",
            _ => "UNSIGNED",
        };
        let attrs = format!(
            "comparison_direction = #stablehlo<comparison_direction {}>, compare_type = #stablehlo<comparison_type {kind}>",
            dir.keyword()
        );
        self.emit1(OP, &[a, b], &attrs, a.ty.with_dtype(DType::Bool))
    }

    /// `pred ? on_true : on_false`, with `pred` i1 of the same shape or rank 0.
    pub fn select(
        &mut self,
        pred: &Value,
        on_true: &Value,
        on_false: &Value,
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.select";
        if pred.dtype() != DType::Bool {
            return Err(BuildError::UnsupportedDType {
                op: OP,
                dtype: pred.dtype(),
                expected: "i1 (bool) predicate",
            });
        }
        if on_true.ty != on_false.ty {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: on_true.ty.clone(),
                rhs: on_false.ty.clone(),
            });
        }
        if pred.rank() != 0 && pred.shape() != on_true.shape() {
            return Err(BuildError::shape(
                OP,
                format!(
                    "predicate shape {:?} must be scalar or equal {:?}",
                    pred.shape(),
                    on_true.shape()
                ),
            ));
        }
        self.emit1(OP, &[pred, on_true, on_false], "", on_true.ty.clone())
    }

    /// `min(max(x, lo), hi)`; `lo`/`hi` have x's type or are rank-0 of x's dtype.
    pub fn clamp(&mut self, lo: &Value, x: &Value, hi: &Value) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.clamp";
        Accepts::Ordered.check(OP, x.dtype())?;
        for bound in [lo, hi] {
            let ok =
                bound.dtype() == x.dtype() && (bound.rank() == 0 || bound.shape() == x.shape());
            if !ok {
                return Err(BuildError::TypeMismatch {
                    op: OP,
                    lhs: bound.ty.clone(),
                    rhs: x.ty.clone(),
                });
            }
        }
        self.emit1(OP, &[lo, x, hi], "", x.ty.clone())
    }

    /// Element type conversion (float<->int truncates toward zero, bool<-x is x != 0; a real
    /// value becomes complex with imaginary part 0). Complex to real is refused (the spec
    /// leaves it undefined): take [`FuncBuilder::real`] first. A no-op returns `x` itself.
    pub fn convert(&mut self, x: &Value, dtype: DType) -> Result<Value, BuildError> {
        if x.dtype() == dtype {
            return Ok(x.clone());
        }
        if x.dtype().is_complex() && !dtype.is_complex() {
            return Err(BuildError::UnsupportedDType {
                op: "stablehlo.convert",
                dtype: x.dtype(),
                expected: "a real type when converting to a real type (take `real` first)",
            });
        }
        self.emit1("stablehlo.convert", &[x], "", x.ty.with_dtype(dtype))
    }

    /// Reinterprets bits as `dtype`. Of the same width: element by element. Narrower: a
    /// trailing dim of `from bits / to bits` elements per word, low bits first; wider: the
    /// last dim (of that many elements) is consumed (StableHLO's `bitcast_convert`).
    pub fn bitcast_convert(&mut self, x: &Value, dtype: DType) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.bitcast_convert";
        for d in [x.dtype(), dtype] {
            Accepts::Ordered.check(OP, d)?;
        }
        let (fb, tb) = (x.dtype().bits(), dtype.bits());
        let mut shape = x.shape().to_vec();
        if tb < fb {
            shape.push(fb / tb);
        } else if tb > fb {
            if shape.last() != Some(&(tb / fb)) {
                return Err(BuildError::shape(
                    OP,
                    format!(
                        "{} {:?} to {dtype} needs a last dim of {}",
                        x.dtype(),
                        x.shape(),
                        tb / fb
                    ),
                ));
            }
            shape.pop();
        }
        self.emit1(OP, &[x], "", TensorType::new(shape, dtype))
    }
}

//! Input specs of `run-mlir`: `DTYPE[DIMS]=VALUE`, e.g. `f32[2,3]=random`, `i32[4]=iota`,
//! `bf16[]=1.5`, `f32[3]=1,2,3`. VALUE is random | zeros | ones | iota | a number | a list.

use super::CliError;
use rand::{Rng, SeedableRng};
use tessera_lowering::host;
use tessera_runtime::{DType, HostTensor, TensorType};

/// One number of a VALUE: integers are kept exact (an `i64` value beyond 2^53 must not pass
/// through an f64).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(i128),
    Float(f64),
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Number::Int(v) => write!(f, "{v}"),
            Number::Float(v) => write!(f, "{v}"),
        }
    }
}

impl Number {
    fn parse(text: &str) -> Option<Number> {
        let t = text.trim();
        t.parse::<i128>()
            .map(Number::Int)
            .ok()
            .or_else(|| t.parse::<f64>().ok().map(Number::Float))
    }

    fn as_f64(self) -> f64 {
        match self {
            Number::Int(v) => v as f64,
            Number::Float(v) => v,
        }
    }

    /// The number as a value of `dtype`, or why it has none: out of the dtype's range, a
    /// fraction or non-finite value for an integer dtype, a finite value that would round
    /// to infinity in a float dtype.
    fn check(self, dtype: DType) -> Result<Number, String> {
        let out_of_range = |range: String| format!("{self} is out of range for {dtype} ({range})");
        if dtype == DType::Bool || dtype.is_int() {
            let v = match self {
                Number::Int(v) => v,
                Number::Float(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e38 => {
                    v as i128
                }
                Number::Float(_) => {
                    return Err(format!("{self} is not an integer, as {dtype} needs"))
                }
            };
            let (lo, hi) = int_range(dtype);
            if v < lo || v > hi {
                return Err(out_of_range(format!("{lo} to {hi}")));
            }
            return Ok(Number::Int(v));
        }
        let v = self.as_f64();
        let stored = HostTensor::from_f64(dtype, vec![1], &[v]).to_f64_vec()[0];
        if v.is_finite() && stored.is_infinite() {
            return Err(out_of_range(format!("it would round to {stored}")));
        }
        Ok(Number::Float(v))
    }
}

/// Smallest and largest value of an integer (or bool) dtype.
fn int_range(dtype: DType) -> (i128, i128) {
    match dtype {
        DType::Bool => (0, 1),
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        _ => (i128::MIN, i128::MAX),
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    Random,
    Iota,
    Value(Number),
    List(Vec<Number>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct InputSpec {
    pub ty: TensorType,
    pub fill: Fill,
}

impl std::str::FromStr for InputSpec {
    type Err = CliError;
    fn from_str(s: &str) -> Result<Self, CliError> {
        let bad = |why: &str| {
            CliError::Usage(format!(
                "bad --input `{s}`: {why} (expected e.g. f32[2,3]=random)"
            ))
        };
        let (ty, value) = s.split_once('=').unwrap_or((s, "random"));
        let (dtype, dims) = ty.split_once('[').ok_or_else(|| bad("missing [dims]"))?;
        let dims = dims
            .strip_suffix(']')
            .ok_or_else(|| bad("missing closing ]"))?;
        let dtype: DType = dtype
            .parse()
            .map_err(|e: tessera_lowering::dtype::UnknownDType| bad(&e.to_string()))?;
        let shape = dims
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| {
                d.parse::<usize>()
                    .map_err(|_| bad(&format!("dimension `{d}` is not a non-negative integer")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let number = |x: &str| {
            Number::parse(x)
                .ok_or_else(|| bad(&format!("`{}` is not a number", x.trim())))?
                .check(dtype)
                .map_err(|why| bad(&why))
        };
        let fill = match value.trim() {
            "random" => Fill::Random,
            "zeros" => Fill::Value(Number::Int(0)),
            "ones" => Fill::Value(Number::Int(1)),
            "iota" => Fill::Iota,
            v if v.contains(',') || v.starts_with('[') || v.ends_with(']') => {
                let inner = match (v.strip_prefix('['), v.strip_suffix(']')) {
                    (Some(_), Some(_)) => &v[1..v.len() - 1],
                    (None, None) => v,
                    _ => return Err(bad("unbalanced [ ] around the list")),
                };
                Fill::List(inner.split(',').map(number).collect::<Result<_, _>>()?)
            }
            v => Fill::Value(Number::parse(v).ok_or_else(|| {
                bad(&format!(
                    "`{v}` is not random, zeros, ones, iota, a number or a list"
                ))
            })?)
            .checked(dtype)
            .map_err(|why| bad(&why))?,
        };
        let spec = InputSpec {
            ty: TensorType { shape, dtype },
            fill,
        };
        let n = host::element_count(dtype, &spec.ty.shape).map_err(|e| bad(&e.to_string()))?;
        match &spec.fill {
            Fill::List(l) if l.len() != n => {
                return Err(bad(&format!("{} values for {n} elements", l.len())))
            }
            Fill::Iota if n > 0 && (dtype == DType::Bool || dtype.is_int()) => {
                let last = Number::Int(n as i128 - 1);
                last.check(dtype)
                    .map_err(|why| bad(&format!("iota's last value {why}")))?;
            }
            _ => {}
        }
        Ok(spec)
    }
}

impl Fill {
    fn checked(self, dtype: DType) -> Result<Fill, String> {
        match self {
            Fill::Value(v) => v.check(dtype).map(Fill::Value),
            other => Ok(other),
        }
    }
}

impl InputSpec {
    pub fn random(ty: TensorType) -> InputSpec {
        InputSpec {
            ty,
            fill: Fill::Random,
        }
    }

    /// The host tensor; random values are uniform in [-1, 1) (0/1 for bool, small ints for
    /// ints). A tensor larger than the host can hold is an error naming its size.
    pub fn materialize(&self, rng: &mut rand::rngs::StdRng) -> Result<HostTensor, CliError> {
        let d = self.ty.dtype;
        let shape = self.ty.shape.clone();
        let bytes = host::byte_len(d, &shape).map_err(tessera_runtime::RuntimeError::from)?;
        let n = host::element_count(d, &shape).map_err(tessera_runtime::RuntimeError::from)?;
        let oom = |need: usize| {
            CliError::Usage(format!(
                "input {d}{shape:?}: making it needs {need} bytes on the host, which the allocator refused"
            ))
        };
        if matches!(d, DType::I64 | DType::U64) {
            // Exact integers, straight to bytes.
            let mut out: Vec<u8> = Vec::new();
            out.try_reserve_exact(bytes).map_err(|_| oom(bytes))?;
            for i in 0..n {
                let v = self.int_at(i, rng);
                if d == DType::I64 {
                    out.extend_from_slice(&(v as i64).to_ne_bytes());
                } else {
                    out.extend_from_slice(&(v as u64).to_ne_bytes());
                }
            }
            return Ok(HostTensor::from_bytes(d, shape, out)
                .map_err(tessera_runtime::RuntimeError::from)?);
        }
        let mut values: Vec<f64> = Vec::new();
        values
            .try_reserve_exact(n)
            .map_err(|_| oom(n.saturating_mul(8).saturating_add(bytes)))?;
        values.extend((0..n).map(|i| self.f64_at(i, rng)));
        Ok(HostTensor::try_from_f64(d, shape, &values)
            .map_err(tessera_runtime::RuntimeError::from)?)
    }

    /// Element `i` of an integer fill (values were range-checked when parsed).
    fn int_at(&self, i: usize, rng: &mut rand::rngs::StdRng) -> i128 {
        match &self.fill {
            Fill::Random => rng.gen_range(0..10),
            Fill::Iota => i as i128,
            Fill::Value(v) => as_int(*v),
            Fill::List(l) => as_int(l[i]),
        }
    }

    fn f64_at(&self, i: usize, rng: &mut rand::rngs::StdRng) -> f64 {
        let d = self.ty.dtype;
        match &self.fill {
            Fill::Random if d == DType::Bool => rng.gen_range(0..2) as f64,
            Fill::Random if d.is_int() => rng.gen_range(0..10) as f64,
            Fill::Random => rng.gen_range(-1.0..1.0),
            Fill::Iota => i as f64,
            Fill::Value(v) => v.as_f64(),
            Fill::List(l) => l[i].as_f64(),
        }
    }
}

fn as_int(n: Number) -> i128 {
    match n {
        Number::Int(v) => v,
        Number::Float(v) => v as i128,
    }
}

pub fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let s: InputSpec = "f32[2,3]=random".parse().unwrap();
        assert_eq!(
            s.ty,
            TensorType {
                shape: vec![2, 3],
                dtype: DType::F32
            }
        );
        assert_eq!(
            "bf16[]=1.5".parse::<InputSpec>().unwrap().fill,
            Fill::Value(Number::Float(1.5))
        );
        assert_eq!(
            "i32[3]=1,2,3".parse::<InputSpec>().unwrap().fill,
            Fill::List(vec![Number::Int(1), Number::Int(2), Number::Int(3)])
        );
        assert_eq!("f32[4]".parse::<InputSpec>().unwrap().fill, Fill::Random);
    }

    #[test]
    fn values_are_exact_and_in_range() {
        let mut r = rng(0);
        let big = "i64[2]=9007199254740993,-9223372036854775808"
            .parse::<InputSpec>()
            .unwrap();
        assert_eq!(
            big.materialize(&mut r).unwrap().to_vec::<i64>().unwrap(),
            vec![9_007_199_254_740_993, i64::MIN]
        );
        let u = "u64[1]=18446744073709551615".parse::<InputSpec>().unwrap();
        assert_eq!(
            u.materialize(&mut r).unwrap().to_vec::<u64>().unwrap(),
            vec![u64::MAX]
        );
        let edge = "i8[3]=-128,127,1e2".parse::<InputSpec>().unwrap();
        assert_eq!(
            edge.materialize(&mut r).unwrap().to_vec::<i8>().unwrap(),
            vec![-128, 127, 100]
        );
        for ok in [
            "f16[1]=65504",
            "f32[1]=inf",
            "f64[1]=-1e300",
            "bool[2]=0,1",
            "u8[256]=iota",
        ] {
            let s: InputSpec = ok.parse().unwrap();
            assert!(s.materialize(&mut r).is_ok(), "{ok}");
        }
    }

    #[test]
    fn inputs_larger_than_memory_are_errors_not_aborts() {
        let s: InputSpec = "f32[99999999999]=random".parse().unwrap();
        let err = s.materialize(&mut rng(0)).unwrap_err().to_string();
        assert!(
            err.contains("needs 1199999999988 bytes on the host"),
            "{err}"
        );
        let s: InputSpec = "i64[99999999999]=1".parse().unwrap();
        let err = s.materialize(&mut rng(0)).unwrap_err().to_string();
        assert!(err.contains("needs 799999999992 bytes"), "{err}");
    }

    #[test]
    fn rejects_bad_specs_with_the_reason() {
        for (spec, why) in [
            ("f33[2]=random", "unknown dtype `f33`"),
            ("f32=random", "missing [dims]"),
            ("f32[2,x]=random", "dimension `x`"),
            ("f32[2]=banana", "`banana` is not"),
            ("f32[2]=1,2,3", "3 values for 2 elements"),
            ("i8[4]=300", "300 is out of range for i8 (-128 to 127)"),
            ("i8[2]=1,-129", "-129 is out of range for i8"),
            ("u8[1]=-1", "-1 is out of range for u8 (0 to 255)"),
            ("u64[1]=18446744073709551616", "out of range for u64"),
            ("i32[1]=1.5", "1.5 is not an integer, as i32 needs"),
            ("i32[1]=nan", "NaN is not an integer"),
            ("bool[1]=2", "2 is out of range for bool (0 to 1)"),
            (
                "f16[1]=70000",
                "70000 is out of range for f16 (it would round to inf)",
            ),
            ("f32[1]=1e39", "out of range for f32"),
            (
                "i8[200]=iota",
                "iota's last value 199 is out of range for i8",
            ),
            (
                "f32[99999999999999999999]=1",
                "dimension `99999999999999999999`",
            ),
            ("f64[4294967296,4294967296]=1", "overflows a 64-bit address"),
        ] {
            let err = spec.parse::<InputSpec>().unwrap_err().to_string();
            assert!(err.contains(why), "{spec}: {err}");
        }
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;
        use proptest::test_runner::{Config, RngSeed};

        /// Dtype names, real and not.
        fn dtype() -> impl Strategy<Value = String> {
            prop_oneof![
                8 => proptest::sample::select(vec![
                    "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32",
                    "u64", "bool", "c64", "c128", "F32", "f", "", "i9",
                ])
                .prop_map(str::to_string),
                1 => "[a-z0-9]{0,5}",
            ]
        }

        /// A dimension: small, huge, or not a number.
        fn dim() -> impl Strategy<Value = String> {
            prop_oneof![
                12 => (0usize..6).prop_map(|d| d.to_string()),
                1 => any::<u64>().prop_map(|d| d.to_string()),
                1 => Just("18446744073709551616".to_string()),
                1 => Just("4294967296".to_string()),
                1 => "[ x0-9-]{0,4}",
            ]
        }

        /// A value token: in range, at a dtype's edge, past it, fractional, special or junk.
        fn number() -> impl Strategy<Value = String> {
            prop_oneof![
                (-300i64..300).prop_map(|v| v.to_string()),
                any::<i64>().prop_map(|v| v.to_string()),
                any::<u64>().prop_map(|v| v.to_string()),
                any::<f64>().prop_map(|v| v.to_string()),
                proptest::sample::select(vec![
                    "127",
                    "128",
                    "-129",
                    "255",
                    "256",
                    "65504",
                    "65520",
                    "1e39",
                    "-0",
                    "nan",
                    "inf",
                    "-inf",
                    "1.5",
                    "1e2",
                    "9007199254740993",
                    "170141183460469231731687303715884105728",
                ])
                .prop_map(str::to_string),
                "[0-9.e+-]{0,6}",
            ]
        }

        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                proptest::sample::select(vec!["random", "zeros", "ones", "iota", ""])
                    .prop_map(str::to_string),
                number(),
                proptest::collection::vec(number(), 0..6).prop_map(|v| v.join(",")),
                proptest::collection::vec(number(), 0..6)
                    .prop_map(|v| format!("[{}]", v.join(","))),
            ]
        }

        fn spec() -> impl Strategy<Value = String> {
            // A list with as many values as the shape has elements.
            let matching =
                (dtype(), proptest::collection::vec(1usize..4, 0..3)).prop_flat_map(|(d, dims)| {
                    let n = dims.iter().product::<usize>();
                    let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
                    proptest::collection::vec(number(), n)
                        .prop_map(move |v| format!("{d}[{}]={}", dims.join(","), v.join(",")))
                });
            prop_oneof![
                3 => matching,
                // Structured: DTYPE[DIMS]=VALUE with every part drawn from the above.
                4 => (dtype(), proptest::collection::vec(dim(), 0..4), proptest::option::of(value()))
                    .prop_map(|(d, dims, v)| {
                        let head = format!("{d}[{}]", dims.join(","));
                        v.map_or(head.clone(), |v| format!("{head}={v}"))
                    }),
                // Anything at all.
                1 => ".{0,24}",
                1 => "[a-z0-9\\[\\],=.-]{0,24}",
            ]
        }

        /// What a parsed spec must make: small tensors with exactly the parsed integers;
        /// huge ones an error (never an abort); mid-sized ones are not materialized here.
        /// Returns whether it was materialized, and whether it was refused as too big.
        fn check_materialize(spec: &InputSpec) -> Result<(bool, bool), TestCaseError> {
            let Ok(n) = host::element_count(spec.ty.dtype, &spec.ty.shape) else {
                return Err(TestCaseError::fail("parse accepted an overflowing shape"));
            };
            let huge = n as u128 * 8 > 1u128 << 44;
            if n > 4096 && !huge {
                return Ok((false, false));
            }
            let made = spec.materialize(&mut rng(7));
            if huge {
                prop_assert!(made.is_err(), "{n} elements were allocated");
                return Ok((false, true));
            }
            let t = made.map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(t.len(), n);
            let d = spec.ty.dtype;
            if let Fill::List(l) = &spec.fill {
                if d.is_int() || d == DType::Bool {
                    let want: Vec<i128> = l.iter().map(|&v| as_int(v)).collect();
                    let got: Vec<i128> = match d {
                        DType::I64 => t
                            .to_vec::<i64>()
                            .unwrap()
                            .into_iter()
                            .map(i128::from)
                            .collect(),
                        DType::U64 => t
                            .to_vec::<u64>()
                            .unwrap()
                            .into_iter()
                            .map(i128::from)
                            .collect(),
                        _ => t.to_f64_vec().into_iter().map(|v| v as i128).collect(),
                    };
                    prop_assert_eq!(got, want);
                }
            }
            Ok((true, false))
        }

        #[test]
        fn no_input_spec_panics_or_aborts() {
            // Fixed seed and case count: the same 10,000 specs on every run.
            let config = Config {
                cases: 10_000,
                rng_seed: RngSeed::Fixed(17),
                failure_persistence: None,
                ..Config::default()
            };
            let mut runner = proptest::test_runner::TestRunner::new(config);
            let counts = std::cell::Cell::new([0usize; 4]);
            let bump = |i: usize| {
                let mut c = counts.get();
                c[i] += 1;
                counts.set(c);
            };
            runner
                .run(&spec(), |text| {
                    bump(0);
                    match text.parse::<InputSpec>() {
                        Ok(spec) => {
                            bump(1);
                            let (made, refused) = check_materialize(&spec)?;
                            if made {
                                bump(2);
                            }
                            if refused {
                                bump(3);
                            }
                        }
                        Err(e) => prop_assert!(e.to_string().contains("bad --input"), "{}", e),
                    }
                    Ok(())
                })
                .unwrap();
            let [cases, parsed, made, refused] = counts.get();
            println!("{cases} specs: {parsed} parsed, {made} materialized, {refused} refused as larger than memory; the rest clean errors");
            assert_eq!(cases, 10_000);
            // The generator reaches every outcome, not only parse errors.
            assert!(
                parsed > 1_000 && made > 500 && refused > 10,
                "{:?}",
                counts.get()
            );
        }
    }
}

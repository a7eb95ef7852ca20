//! Input specs of `run-mlir`: `DTYPE[DIMS]=VALUE`, e.g. `f32[2,3]=random`, `i32[4]=iota`,
//! `bf16[]=1.5`, `f32[3]=1,2,3`. VALUE is random | zeros | ones | iota | a number | a list.

use super::CliError;
use rand::{Rng, SeedableRng};
use tessera_runtime::{DType, HostTensor, TensorType};

#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    Random,
    Iota,
    Value(f64),
    List(Vec<f64>),
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
        let fill = match value.trim() {
            "random" => Fill::Random,
            "zeros" => Fill::Value(0.0),
            "ones" => Fill::Value(1.0),
            "iota" => Fill::Iota,
            v if v.contains(',') || v.starts_with('[') => Fill::List(
                v.trim_matches(|c| c == '[' || c == ']')
                    .split(',')
                    .map(|x| {
                        x.trim()
                            .parse::<f64>()
                            .map_err(|_| bad(&format!("`{x}` is not a number")))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            v => Fill::Value(v.parse().map_err(|_| {
                bad(&format!(
                    "`{v}` is not random, zeros, ones, iota, a number or a list"
                ))
            })?),
        };
        let spec = InputSpec {
            ty: TensorType { shape, dtype },
            fill,
        };
        if let Fill::List(l) = &spec.fill {
            let n: usize = spec.ty.shape.iter().product();
            if l.len() != n {
                return Err(bad(&format!("{} values for {n} elements", l.len())));
            }
        }
        Ok(spec)
    }
}

impl InputSpec {
    pub fn random(ty: TensorType) -> InputSpec {
        InputSpec {
            ty,
            fill: Fill::Random,
        }
    }

    /// The host tensor; random values are uniform in [-1, 1) (0/1 for bool, small ints for ints).
    pub fn materialize(&self, rng: &mut rand::rngs::StdRng) -> HostTensor {
        let n: usize = self.ty.shape.iter().product();
        let d = self.ty.dtype;
        let values: Vec<f64> = match &self.fill {
            Fill::Random if d == DType::Bool => {
                (0..n).map(|_| rng.gen_range(0..2) as f64).collect()
            }
            Fill::Random if d.is_int() => (0..n).map(|_| rng.gen_range(0..10) as f64).collect(),
            Fill::Random => (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect(),
            Fill::Iota => (0..n).map(|i| i as f64).collect(),
            Fill::Value(v) => vec![*v; n],
            Fill::List(l) => l.clone(),
        };
        HostTensor::from_f64(d, self.ty.shape.clone(), &values)
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
            Fill::Value(1.5)
        );
        assert_eq!(
            "i32[3]=1,2,3".parse::<InputSpec>().unwrap().fill,
            Fill::List(vec![1.0, 2.0, 3.0])
        );
        assert_eq!("f32[4]".parse::<InputSpec>().unwrap().fill, Fill::Random);
    }

    #[test]
    fn rejects_bad_specs_with_the_reason() {
        for (spec, why) in [
            ("f33[2]=random", "unknown dtype `f33`"),
            ("f32=random", "missing [dims]"),
            ("f32[2,x]=random", "dimension `x`"),
            ("f32[2]=banana", "`banana` is not"),
            ("f32[2]=1,2,3", "3 values for 2 elements"),
        ] {
            let err = spec.parse::<InputSpec>().unwrap_err().to_string();
            assert!(err.contains(why), "{spec}: {err}");
        }
    }
}

//! NumPy/PyTorch-style implicit broadcasting on top of the explicit `broadcast_in_dim`.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::Value;
use super::elementwise::{BinaryOp, Comparison};

/// The broadcast of two shapes: aligned at the right, each dim equal or 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, BuildError> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= rank {
            s[i + s.len() - rank]
        } else {
            1
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(BuildError::Broadcast {
                lhs: a.to_vec(),
                rhs: b.to_vec(),
            }),
        })
        .collect()
}

impl FuncBuilder {
    /// Broadcasts `x` to `shape` by NumPy rules (trailing alignment, size-1 dims stretch).
    /// Returns `x` itself when the shape already matches.
    pub fn broadcast_to(&mut self, x: &Value, shape: &[usize]) -> Result<Value, BuildError> {
        if x.shape() == shape {
            return Ok(x.clone());
        }
        if broadcast_shapes(x.shape(), shape)? != shape {
            return Err(BuildError::Broadcast {
                lhs: x.shape().to_vec(),
                rhs: shape.to_vec(),
            });
        }
        let offset = shape.len() - x.rank();
        let dims: Vec<usize> = (offset..shape.len()).collect();
        self.broadcast_in_dim(x, shape, &dims)
    }

    /// Both operands broadcast to their common shape.
    pub fn broadcast_pair(&mut self, a: &Value, b: &Value) -> Result<(Value, Value), BuildError> {
        let shape = broadcast_shapes(a.shape(), b.shape())?;
        Ok((self.broadcast_to(a, &shape)?, self.broadcast_to(b, &shape)?))
    }

    /// A binary op with implicit broadcasting (dtypes must already agree).
    pub fn broadcast_binary(
        &mut self,
        op: BinaryOp,
        a: &Value,
        b: &Value,
    ) -> Result<Value, BuildError> {
        let (a, b) = self.broadcast_pair(a, b)?;
        self.binary(op, &a, &b)
    }

    /// A comparison with implicit broadcasting.
    pub fn broadcast_compare(
        &mut self,
        dir: Comparison,
        a: &Value,
        b: &Value,
    ) -> Result<Value, BuildError> {
        let (a, b) = self.broadcast_pair(a, b)?;
        self.compare(dir, &a, &b)
    }

    /// `select` with all three operands broadcast to their common shape.
    pub fn broadcast_select(
        &mut self,
        pred: &Value,
        t: &Value,
        f: &Value,
    ) -> Result<Value, BuildError> {
        let shape = broadcast_shapes(&broadcast_shapes(pred.shape(), t.shape())?, f.shape())?;
        let p = self.broadcast_to(pred, &shape)?;
        let t = self.broadcast_to(t, &shape)?;
        let f = self.broadcast_to(f, &shape)?;
        self.select(&p, &t, &f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_rules() {
        assert_eq!(
            broadcast_shapes(&[2, 1, 3], &[4, 1]).unwrap(),
            vec![2, 4, 3]
        );
        assert_eq!(broadcast_shapes(&[], &[5]).unwrap(), vec![5]);
        assert_eq!(broadcast_shapes(&[0, 3], &[1, 3]).unwrap(), vec![0, 3]);
        assert!(broadcast_shapes(&[2, 3], &[3, 2]).is_err());
    }
}

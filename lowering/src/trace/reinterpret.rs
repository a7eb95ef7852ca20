//! Static slices of tile values and Pallas' width-changing bitcast (`pltpu.bitcast`).

use super::builder::with;
use super::element::Element;
use super::value::{Scalar, Tile, Traced};
use crate::ir::{bitcast_shape, slice_in_bounds, Literal, Loc, OpKind, Type};

impl<E: Element> Tile<E> {
    /// `self[starts[d] .. starts[d] + sizes[d]]` along every dim: a static window of a tile
    /// value (StableHLO `slice`, Mosaic `vector.extract_strided_slice`). A window that does
    /// not fit is an error at this line.
    #[track_caller]
    pub fn slice(self, starts: impl Into<Vec<usize>>, sizes: impl Into<Vec<usize>>) -> Tile<E> {
        let sizes = sizes.into();
        let strides = vec![1; sizes.len()];
        slice_at(self, starts.into(), sizes, strides, Loc::caller())
    }

    /// Every `strides[d]`-th element from `starts[d]`, `sizes[d]` of them per dim. The CPU
    /// forms and the interpreter take any strides; Mosaic slices with unit strides only, so
    /// on TPU others are reported at this line when the kernel is lowered.
    #[track_caller]
    pub fn slice_strided(
        self,
        starts: impl Into<Vec<usize>>,
        sizes: impl Into<Vec<usize>>,
        strides: impl Into<Vec<usize>>,
    ) -> Tile<E> {
        slice_at(
            self,
            starts.into(),
            sizes.into(),
            strides.into(),
            Loc::caller(),
        )
    }

    /// The element at static `indices` as a scalar (`x[i, j]` in JAX): a one-element slice,
    /// so an index out of range is an error at this line.
    #[track_caller]
    pub fn element(self, indices: impl Into<Vec<usize>>) -> Scalar<E> {
        let (loc, starts) = (Loc::caller(), indices.into());
        let ones = vec![1; starts.len()];
        let one = slice_at(self, starts, ones.clone(), ones, loc);
        Scalar::from_val(with(|b| {
            let id = b.id(one.v, "element", loc);
            b.emit1(OpKind::Reshape { x: id }, Type::scalar(E::DTYPE), loc)
        }))
    }

    /// Reinterprets the bits as `U` of another width by packing or unpacking along the
    /// second-minor dim, as Pallas' `pltpu.bitcast` (Mosaic `tpu.bitcast`): `[2n, m]` bf16 <->
    /// `[n, m]` u32, `[4n, m]` i8 <-> `[n, m]` i32. Rows `p*i .. p*i + p` of the narrow side
    /// share word row `i`, row `p*i + k` in bits `k*narrow ..` (low bits first), which is how
    /// the TPU packs narrow types into 32-bit sublanes. It is a method of its own, not a
    /// width-changing [`bitcast`](Tile::bitcast), because it changes the shape: `bitcast`
    /// keeps `lax.bitcast_convert_type`'s same-shape meaning and refuses a width change.
    /// The same width is a plain bitcast. A rank below 2 or a second-minor dim that does not
    /// pack is an error at this line.
    #[track_caller]
    pub fn pack_bitcast<U: Element>(self) -> Tile<U> {
        let loc = Loc::caller();
        Tile::from_val(with(|b| {
            let shape = b.ty(self.v).shape().to_vec();
            let to = match bitcast_shape(&shape, E::DTYPE, U::DTYPE) {
                Ok(to) => to,
                Err(message) => {
                    b.op_error("pack_bitcast", message, loc);
                    return b.constant(Literal::Int(0), Type::tile(U::DTYPE, shape), loc);
                }
            };
            let x = b.id(self.v, "pack_bitcast", loc);
            b.emit1(OpKind::Bitcast { x }, Type::tile(U::DTYPE, to), loc)
        }))
    }
}

fn slice_at<E: Element>(
    x: Tile<E>,
    starts: Vec<usize>,
    sizes: Vec<usize>,
    strides: Vec<usize>,
    loc: Loc,
) -> Tile<E> {
    Tile::from_val(with(|b| {
        let shape = b.ty(x.v).shape().to_vec();
        if let Err(message) = slice_in_bounds(&shape, &starts, &sizes, &strides) {
            b.op_error("slice", message, loc);
            return b.constant(Literal::Int(0), Type::tile(E::DTYPE, sizes), loc);
        }
        let x = b.id(x.v, "slice", loc);
        b.emit1(
            OpKind::Slice { x, starts, strides },
            Type::tile(E::DTYPE, sizes),
            loc,
        )
    }))
}

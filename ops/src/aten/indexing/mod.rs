//! Default lowerings: indexing ops (gather/scatter families, advanced indexing, nonzero,
//! embedding).

mod advanced;
mod embed;
mod ops;
mod search;
pub(crate) mod points;
pub(crate) use embed::embedding_dense_backward;
mod writes;

use crate::lower::Lowering;
use crate::lowerings;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    ("gather", ops::gather),
    ("index_select", ops::index_select),
    ("scatter.src", ops::scatter_src),
    ("scatter.value", ops::scatter_value),
    ("scatter_add", ops::scatter_add),
    ("scatter_reduce.two", ops::scatter_reduce),
    ("index_add", ops::index_add),
    ("index_copy", ops::index_copy),
    ("select_scatter", writes::select_scatter),
    ("slice_scatter", writes::slice_scatter),
    ("select_backward", writes::select_backward),
    ("slice_backward", writes::slice_backward),
    ("masked_scatter", writes::masked_scatter),
    ("embedding", embed::embedding),
    ("embedding_dense_backward", embed::embedding_dense_backward),
    ("index.Tensor", advanced::index),
    ("index_put", advanced::index_put),
    ("nonzero", advanced::nonzero),
    ("argwhere", advanced::nonzero),
    ("_unsafe_index.Tensor", advanced::index),
    ("_unsafe_index_put", advanced::index_put),
    ("searchsorted.Tensor", search::searchsorted),
    ("bucketize.Tensor", search::bucketize),
    ("isin.Tensor_Tensor", search::isin),
    ("take", search::take),
    ("take_along_dim", search::take_along_dim),
    ("index_fill.int_Scalar", search::index_fill),
    ("index_fill.int_Tensor", search::index_fill),
    ("one_hot", search::one_hot),
];

//! Default lowerings: shape and view ops. Views are computed as copies (Tessera's tensors are
//! values); `common` holds helpers the indexing and creation families use too.

pub(crate) mod common;
mod join;
mod misc;
pub(crate) mod views;

use crate::lower::Lowering;
use crate::lowerings;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    ("alias", views::identity),
    ("detach", views::identity),
    ("contiguous", views::identity),
    ("view", |cx, a| views::view(cx, a, "size")),
    ("reshape", |cx, a| views::view(cx, a, "shape")),
    ("expand", views::expand),
    ("permute", views::permute),
    ("t", views::t),
    ("transpose.int", views::transpose),
    ("squeeze.dim", views::squeeze_dim),
    ("squeeze.dims", views::squeeze_list),
    ("unsqueeze", views::unsqueeze_op),
    ("select.int", views::select),
    ("slice.Tensor", views::slice),
    ("narrow", views::narrow),
    ("diagonal", views::diagonal),
    ("as_strided", views::as_strided),
    ("cat", join::cat),
    ("stack", join::stack),
    ("split.Tensor", join::split),
    ("split_with_sizes", join::split_with_sizes),
    ("chunk", join::chunk),
    ("unbind.int", join::unbind),
    ("constant_pad_nd", misc::constant_pad_nd),
    ("flip", misc::flip),
    ("repeat", misc::repeat),
    ("roll", misc::roll),
    ("tril", |cx, a| misc::tri(cx, a, true)),
    ("triu", |cx, a| misc::tri(cx, a, false)),
];

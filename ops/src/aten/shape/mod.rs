//! Default lowerings: shape and view ops. Views are computed as copies (Tessera's tensors are
//! values); `common` holds helpers the indexing and creation families use too.

pub(crate) mod common;
mod diag;
mod join;
mod misc;
mod rearrange;
mod stack;
pub(crate) mod views;

pub(crate) use join::cat_values;
pub(crate) use misc::constant_pad_nd;

use crate::lower::Lowering;
use crate::lowerings;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    ("diagonal", views::diagonal),
    ("constant_pad_nd", misc::constant_pad_nd),
    ("repeat", misc::repeat),
    // The `_copy` ops functionalization emits for views: the same values.
    ("diagonal_copy", views::diagonal),
    ("tile", rearrange::tile),
    ("fliplr", |cx, a| rearrange::flip_lr_ud(cx, a, true)),
    ("flipud", |cx, a| rearrange::flip_lr_ud(cx, a, false)),
    ("rot90", rearrange::rot90),
    ("ravel", rearrange::ravel),
    ("atleast_1d", |cx, a| stack::atleast_nd(cx, a, 1)),
    ("atleast_2d", |cx, a| stack::atleast_nd(cx, a, 2)),
    ("atleast_3d", |cx, a| stack::atleast_nd(cx, a, 3)),
    ("hstack", |cx, a| stack::hvd_stack(cx, a, 'h')),
    ("vstack", |cx, a| stack::hvd_stack(cx, a, 'v')),
    ("dstack", |cx, a| stack::hvd_stack(cx, a, 'd')),
    ("column_stack", |cx, a| stack::hvd_stack(cx, a, 'c')),
    ("block_diag", stack::block_diag),
    ("repeat_interleave.self_int", stack::repeat_interleave),
    ("sum_to_size", stack::sum_to_size),
    ("pixel_shuffle", |cx, a| rearrange::pixel_shuffle(cx, a, true)),
    ("pixel_unshuffle", |cx, a| rearrange::pixel_shuffle(cx, a, false)),
    ("diag_embed", diag::diag_embed),
    ("diag", diag::diag),
    ("diagonal_scatter", diag::diagonal_scatter),
    ("as_strided_scatter", views::as_strided_scatter),
    ("diagonal_backward", diag::diagonal_backward),
    ("tril", |cx, a| misc::tri(cx, a, true)),
    ("triu", |cx, a| misc::tri(cx, a, false)),
];

/// The lowerings that also take complex tensors (c64, c128): the views (with the `_copy` ops
/// functionalization emits for them), joins and splits, which move elements without looking
/// at them.
pub(super) const COMPLEX_LOWERINGS: &[Lowering] = lowerings![complex:
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
    ("as_strided", views::as_strided),
    ("cat", join::cat),
    ("stack", join::stack),
    ("split.Tensor", join::split),
    ("split_with_sizes", join::split_with_sizes),
    ("chunk", join::chunk),
    ("unbind.int", join::unbind),
    ("flip", misc::flip),
    ("roll", misc::roll),
    ("_unsafe_view", |cx, a| views::view(cx, a, "size")),
    ("view_copy", |cx, a| views::view(cx, a, "size")),
    ("permute_copy", views::permute),
    ("t_copy", views::t),
    ("transpose_copy.int", views::transpose),
    ("unsqueeze_copy", views::unsqueeze_op),
    ("squeeze_copy", rearrange::squeeze_all),
    ("squeeze_copy.dim", views::squeeze_dim),
    ("squeeze_copy.dims", views::squeeze_list),
    ("expand_copy", views::expand),
    ("alias_copy", views::identity),
    ("detach_copy", views::identity),
    ("lift_fresh_copy", views::identity),
    ("slice_copy.Tensor", views::slice),
    ("select_copy.int", views::select),
    ("narrow_copy", views::narrow),
    ("split_copy.Tensor", join::split),
    ("split_with_sizes_copy", join::split_with_sizes),
    ("unbind_copy.int", join::unbind),
    ("as_strided_copy", views::as_strided),
    ("unfold_copy", rearrange::unfold),
    ("squeeze", rearrange::squeeze_all),
    ("flatten.using_ints", rearrange::flatten),
    ("unflatten.int", rearrange::unflatten),
    ("movedim.int", rearrange::movedim),
    ("movedim.intlist", rearrange::movedim),
    ("swapaxes", rearrange::swapaxes),
    ("view_as", rearrange::view_as),
    ("expand_as", rearrange::expand_as),
    ("broadcast_to", views::expand),
    ("reshape_as", rearrange::view_as),
    ("_reshape_alias", |cx, a| views::view(cx, a, "size")),
    ("lift", views::identity),
    ("lift_fresh", views::identity),
    ("unfold", rearrange::unfold),
];

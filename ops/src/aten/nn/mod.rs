//! Default lowerings: nn ops (convolution, pooling, normalization, padding, upsampling and
//! grid sampling, losses and their backward ops, attention, embedding bags).
//!
//! Half-precision inputs (f16, bf16) compute in f32 and round once, as PyTorch's CPU kernels
//! do with their "opmath" type, except where PyTorch's CPU kernel itself rounds intermediates
//! to the low precision (col2im adds, pooling gradients, 3-d
//! adaptive pooling, the scalar grid sampler, bf16 batch-norm statistics): there
//! `common::Rounding` reproduces those roundings, so results agree bit for bit or nearly.
//!
//! Masked-out (`output_mask` False) or undefined gradients are None, as in PyTorch.
//! Known differences from PyTorch: the composite `batch_norm` does not update
//! `running_mean`/`running_var` in place (its schema marks nothing written; eager PyTorch
//! reaches `_native_batch_norm_legit`, which does); class targets out of range are not
//! detected (PyTorch raises, data-dependently).

mod adaptive;
mod attention;
mod batch_norm;
mod common;
mod composite;
mod conv;
mod conv_taps;
mod embedding;
mod fold;
mod grid;
mod loss;
mod loss_pointwise;
mod norm;
mod pad;
mod pool;
mod resample_grad;
mod upsample;
mod weight_norm;

use crate::lower::Lowering;
use crate::lowerings;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    ("convolution", conv::convolution),
    ("convolution_backward", conv::convolution_backward),
    ("conv1d", |cx, a| composite::conv_nd(cx, a, 1, false)),
    ("conv2d", |cx, a| composite::conv_nd(cx, a, 2, false)),
    ("conv3d", |cx, a| composite::conv_nd(cx, a, 3, false)),
    ("conv_transpose1d", |cx, a| composite::conv_nd(cx, a, 1, true)),
    ("conv_transpose2d.input", |cx, a| composite::conv_nd(cx, a, 2, true)),
    ("conv_transpose3d.input", |cx, a| composite::conv_nd(cx, a, 3, true)),
    ("_convolution", composite::convolution_flags),
    ("max_pool1d", |cx, a| composite::max_pool(cx, a, 1)),
    ("max_pool2d", |cx, a| composite::max_pool(cx, a, 2)),
    ("max_pool3d", |cx, a| composite::max_pool(cx, a, 3)),
    ("adaptive_avg_pool2d", adaptive::adaptive_avg_pool2d),
    ("adaptive_avg_pool3d", adaptive::adaptive_avg_pool3d),
    ("replication_pad1d", |cx, a| pad::pad(cx, a, 1, pad::Mode::Replicate)),
    ("reflection_pad1d_backward", |cx, a| resample_grad::pad_backward(cx, a, 1, pad::Mode::Reflect)),
    ("reflection_pad2d_backward", |cx, a| resample_grad::pad_backward(cx, a, 2, pad::Mode::Reflect)),
    ("reflection_pad3d_backward", |cx, a| resample_grad::pad_backward(cx, a, 3, pad::Mode::Reflect)),
    ("replication_pad1d_backward", |cx, a| resample_grad::pad_backward(cx, a, 1, pad::Mode::Replicate)),
    ("replication_pad2d_backward", |cx, a| resample_grad::pad_backward(cx, a, 2, pad::Mode::Replicate)),
    ("replication_pad3d_backward", |cx, a| resample_grad::pad_backward(cx, a, 3, pad::Mode::Replicate)),
    ("upsample_nearest2d_backward", resample_grad::upsample_nearest2d_backward),
    ("upsample_bilinear2d_backward", resample_grad::upsample_bilinear2d_backward),
    ("pad", composite::pad),
    ("nll_loss", composite::nll_loss),
    ("nll_loss2d_forward", loss::nll_loss2d_forward),
    ("nll_loss2d_backward", loss::nll_loss2d_backward),
    ("embedding_backward", composite::embedding_backward),
    ("cosine_similarity", composite::cosine_similarity),
    ("pairwise_distance", composite::pairwise_distance),
    ("col2im", fold::col2im),
    ("avg_pool1d", pool::avg_pool1d),
    ("avg_pool2d", pool::avg_pool2d),
    ("avg_pool3d", pool::avg_pool3d),
    ("avg_pool2d_backward", pool::avg_pool2d_backward),
    ("avg_pool3d_backward", pool::avg_pool3d_backward),
    ("max_pool2d_with_indices", pool::max_pool2d_with_indices),
    ("max_pool3d_with_indices", pool::max_pool3d_with_indices),
    (
        "max_pool2d_with_indices_backward",
        pool::max_pool2d_with_indices_backward
    ),
    (
        "max_pool3d_with_indices_backward",
        pool::max_pool3d_with_indices_backward
    ),
    ("adaptive_avg_pool1d", adaptive::adaptive_avg_pool1d),
    ("_adaptive_avg_pool2d", adaptive::adaptive_avg_pool2d),
    ("_adaptive_avg_pool3d", adaptive::adaptive_avg_pool3d),
    ("_adaptive_avg_pool2d_backward", adaptive::adaptive_avg_pool2d_backward),
    ("_native_batch_norm_legit", batch_norm::batch_norm_legit),
    (
        "_native_batch_norm_legit.no_stats",
        batch_norm::batch_norm_legit_no_stats
    ),
    (
        "_native_batch_norm_legit_no_training",
        batch_norm::batch_norm_legit_no_training
    ),
    ("batch_norm", batch_norm::batch_norm),
    ("native_batch_norm", batch_norm::native_batch_norm),
    ("native_batch_norm.out", batch_norm::native_batch_norm),
    ("native_batch_norm_backward", batch_norm::native_batch_norm_backward),
    ("native_layer_norm", norm::native_layer_norm),
    ("native_layer_norm_backward", norm::native_layer_norm_backward),
    ("layer_norm", norm::layer_norm),
    ("native_group_norm", norm::native_group_norm),
    ("native_group_norm_backward", norm::native_group_norm_backward),
    ("group_norm", norm::group_norm),
    ("rms_norm", norm::rms_norm),
    ("_weight_norm_interface", weight_norm::weight_norm_interface),
    ("_weight_norm_interface_backward", weight_norm::weight_norm_interface_backward),
    ("_weight_norm", weight_norm::weight_norm_op),
    ("reflection_pad1d", |cx, a| pad::pad(cx, a, 1, pad::Mode::Reflect)),
    ("reflection_pad2d", |cx, a| pad::pad(cx, a, 2, pad::Mode::Reflect)),
    ("reflection_pad3d", |cx, a| pad::pad(cx, a, 3, pad::Mode::Reflect)),
    ("replication_pad2d", |cx, a| pad::pad(cx, a, 2, pad::Mode::Replicate)),
    ("replication_pad3d", |cx, a| pad::pad(cx, a, 3, pad::Mode::Replicate)),
    ("upsample_nearest2d.vec", upsample::upsample_nearest2d),
    ("upsample_bilinear2d.vec", upsample::upsample_bilinear2d),
    ("upsample_nearest2d", |cx, a| upsample::upsample_nearest_nd(cx, a, 2)),
    ("upsample_bilinear2d", |cx, a| upsample::upsample_linear_nd(cx, a, 2)),
    ("upsample_nearest1d", |cx, a| upsample::upsample_nearest_nd(cx, a, 1)),
    ("upsample_nearest1d.vec", |cx, a| upsample::upsample_nearest_nd(cx, a, 1)),
    ("upsample_nearest3d", |cx, a| upsample::upsample_nearest_nd(cx, a, 3)),
    ("upsample_nearest3d.vec", |cx, a| upsample::upsample_nearest_nd(cx, a, 3)),
    ("upsample_linear1d", |cx, a| upsample::upsample_linear_nd(cx, a, 1)),
    ("upsample_linear1d.vec", |cx, a| upsample::upsample_linear_nd(cx, a, 1)),
    ("upsample_trilinear3d", |cx, a| upsample::upsample_linear_nd(cx, a, 3)),
    ("upsample_trilinear3d.vec", |cx, a| upsample::upsample_linear_nd(cx, a, 3)),
    ("grid_sampler_2d", grid::grid_sampler_2d),
    ("mse_loss", loss::mse_loss),
    ("binary_cross_entropy", loss::binary_cross_entropy),
    ("nll_loss_forward", loss::nll_loss_forward),
    ("cross_entropy_loss", loss::cross_entropy_loss),
    ("nll_loss_backward", loss::nll_loss_backward),
    ("mse_loss_backward", loss_pointwise::mse_loss_backward),
    ("binary_cross_entropy_backward", loss_pointwise::binary_cross_entropy_backward),
    ("l1_loss", loss_pointwise::l1_loss),
    ("smooth_l1_loss", loss_pointwise::smooth_l1_loss),
    ("smooth_l1_loss_backward", |cx, a| loss_pointwise::smooth_backward(cx, a, false)),
    ("huber_loss", loss_pointwise::huber_loss),
    ("huber_loss_backward", |cx, a| loss_pointwise::smooth_backward(cx, a, true)),
    ("soft_margin_loss", loss_pointwise::soft_margin_loss),
    ("soft_margin_loss_backward", loss_pointwise::soft_margin_loss_backward),
    ("binary_cross_entropy_with_logits", loss_pointwise::bce_with_logits),
    ("kl_div", loss_pointwise::kl_div),
    ("margin_ranking_loss", loss_pointwise::margin_ranking_loss),
    ("hinge_embedding_loss", loss_pointwise::hinge_embedding_loss),
    ("poisson_nll_loss", loss_pointwise::poisson_nll_loss),
    ("cosine_embedding_loss", loss_pointwise::cosine_embedding_loss),
    ("scaled_dot_product_attention", attention::sdpa),
    ("_scaled_dot_product_flash_attention_for_cpu", attention::flash_cpu),
    (
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        attention::flash_cpu_backward
    ),
    ("_native_multi_head_attention", attention::native_mha),
    ("_embedding_bag", embedding::embedding_bag),
];

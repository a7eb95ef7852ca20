//! `stablehlo.convolution` (ATen's convolution, conv_transpose via lhs dilation, grouped and
//! depthwise convs via feature groups).

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::Value;
use super::dot::Precision;
use super::{as_i64, check_axes, i64_array};

/// Which dim of each operand is batch / feature / spatial.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDims {
    pub input_batch: usize,
    pub input_feature: usize,
    pub input_spatial: Vec<usize>,
    pub kernel_input_feature: usize,
    pub kernel_output_feature: usize,
    pub kernel_spatial: Vec<usize>,
    pub output_batch: usize,
    pub output_feature: usize,
    pub output_spatial: Vec<usize>,
}

impl ConvDims {
    /// PyTorch's layout: input `[N, C, *spatial]`, weight `[O, I, *spatial]`, output
    /// `[N, O, *spatial]`.
    pub fn nchw(spatial: usize) -> Self {
        let sp: Vec<usize> = (2..2 + spatial).collect();
        ConvDims {
            input_batch: 0,
            input_feature: 1,
            input_spatial: sp.clone(),
            kernel_input_feature: 1,
            kernel_output_feature: 0,
            kernel_spatial: sp.clone(),
            output_batch: 0,
            output_feature: 1,
            output_spatial: sp,
        }
    }
}

/// Window attributes; empty vectors mean the defaults (stride 1, no padding, dilation 1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvOptions {
    pub window_strides: Vec<usize>,
    /// (low, high) per spatial dim.
    pub padding: Vec<(i64, i64)>,
    pub lhs_dilation: Vec<usize>,
    pub rhs_dilation: Vec<usize>,
    pub feature_group_count: usize,
    pub batch_group_count: usize,
    pub precision: Precision,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            window_strides: Vec::new(),
            padding: Vec::new(),
            lhs_dilation: Vec::new(),
            rhs_dilation: Vec::new(),
            feature_group_count: 1,
            batch_group_count: 1,
            precision: Precision::Default,
        }
    }
}

/// `[b, f, 0, 1]`: the label of each dim of one operand in `#stablehlo.conv<...>`.
fn layout(rank: usize, first: (usize, &str), second: (usize, &str), spatial: &[usize]) -> String {
    let mut labels = vec![String::new(); rank];
    labels[first.0] = first.1.to_string();
    labels[second.0] = second.1.to_string();
    for (i, &d) in spatial.iter().enumerate() {
        labels[d] = i.to_string();
    }
    format!("[{}]", labels.join(", "))
}

impl FuncBuilder {
    pub fn convolution(
        &mut self,
        lhs: &Value,
        rhs: &Value,
        dims: &ConvDims,
        opts: &ConvOptions,
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.convolution";
        let bad = |m: String| BuildError::shape(OP, m);
        if lhs.dtype() != rhs.dtype() {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: lhs.ty.clone(),
                rhs: rhs.ty.clone(),
            });
        }
        let s = dims.input_spatial.len();
        let rank = s + 2;
        if lhs.rank() != rank
            || rhs.rank() != rank
            || dims.kernel_spatial.len() != s
            || dims.output_spatial.len() != s
        {
            return Err(bad(format!(
                "{s} spatial dims need operands of rank {rank}, got {:?} and {:?}",
                lhs.shape(),
                rhs.shape()
            )));
        }
        let in_dims: Vec<usize> = [dims.input_batch, dims.input_feature]
            .iter()
            .chain(&dims.input_spatial)
            .copied()
            .collect();
        let k_dims: Vec<usize> = [dims.kernel_input_feature, dims.kernel_output_feature]
            .iter()
            .chain(&dims.kernel_spatial)
            .copied()
            .collect();
        let o_dims: Vec<usize> = [dims.output_batch, dims.output_feature]
            .iter()
            .chain(&dims.output_spatial)
            .copied()
            .collect();
        for d in [&in_dims, &k_dims, &o_dims] {
            check_axes(OP, d, rank)?;
        }
        let or = |v: &Vec<usize>| if v.is_empty() { vec![1; s] } else { v.clone() };
        let (strides, ldil, rdil) = (
            or(&opts.window_strides),
            or(&opts.lhs_dilation),
            or(&opts.rhs_dilation),
        );
        let padding = if opts.padding.is_empty() {
            vec![(0, 0); s]
        } else {
            opts.padding.clone()
        };
        if strides.len() != s || ldil.len() != s || rdil.len() != s || padding.len() != s {
            return Err(bad(format!("window attributes must each have {s} entries")));
        }
        let (fg, bg) = (opts.feature_group_count, opts.batch_group_count);
        let (n, c) = (
            lhs.shape()[dims.input_batch],
            lhs.shape()[dims.input_feature],
        );
        let (ki, ko) = (
            rhs.shape()[dims.kernel_input_feature],
            rhs.shape()[dims.kernel_output_feature],
        );
        if fg == 0
            || bg == 0
            || c % fg != 0
            || c / fg != ki
            || ko % fg != 0
            || ko % bg != 0
            || n % bg != 0
        {
            return Err(bad(format!("groups (feature {fg}, batch {bg}) do not fit input features {c}, kernel {ki} in / {ko} out, batch {n}")));
        }
        let mut out = vec![0; rank];
        out[dims.output_batch] = n / bg;
        out[dims.output_feature] = ko;
        for i in 0..s {
            let x = lhs.shape()[dims.input_spatial[i]] as i64;
            let k = rhs.shape()[dims.kernel_spatial[i]] as i64;
            if strides[i] == 0 || ldil[i] == 0 || rdil[i] == 0 {
                return Err(bad(format!(
                    "spatial dim {i}: strides and dilations must be positive"
                )));
            }
            let dilated = if x == 0 {
                0
            } else {
                (x - 1) * ldil[i] as i64 + 1
            };
            let padded = dilated + padding[i].0 + padding[i].1;
            let window = if k == 0 {
                0
            } else {
                (k - 1) * rdil[i] as i64 + 1
            };
            out[dims.output_spatial[i]] = if padded < window || padded < 0 {
                0
            } else {
                ((padded - window) / strides[i] as i64 + 1) as usize
            };
        }
        let pads: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
        let p = match opts.precision {
            Precision::Default => "DEFAULT",
            Precision::High => "HIGH",
            Precision::Highest => "HIGHEST",
        };
        let mut attrs = format!(
            "batch_group_count = {bg} : i64, dimension_numbers = #stablehlo.conv<{}x{}->{}>, feature_group_count = {fg} : i64, \
             lhs_dilation = {}, rhs_dilation = {}, window_strides = {}, precision_config = [#stablehlo<precision {p}>, #stablehlo<precision {p}>]",
            layout(rank, (dims.input_batch, "b"), (dims.input_feature, "f"), &dims.input_spatial),
            layout(rank, (dims.kernel_input_feature, "i"), (dims.kernel_output_feature, "o"), &dims.kernel_spatial),
            layout(rank, (dims.output_batch, "b"), (dims.output_feature, "f"), &dims.output_spatial),
            i64_array(&as_i64(&ldil)),
            i64_array(&as_i64(&rdil)),
            i64_array(&as_i64(&strides)),
        );
        if s > 0 {
            attrs += &format!(
                ", padding = dense<[{}]> : tensor<{s}x2xi64>",
                pads.join(", ")
            );
        }
        self.emit1(OP, &[lhs, rhs], &attrs, lhs.ty.with_shape(out))
    }
}

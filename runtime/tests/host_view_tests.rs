//! Outputs read in place on the CPU plugin (`Buffer::into_host_view`): the memory holds the
//! row-major result, stays valid while the view lives, and an empty result is given back.

mod common;

use tessera_runtime::{CompileOptions, HostTensor};

/// A transpose, so that a layout other than the argument's would show in the elements.
const TRANSPOSE_SCALE: &str = "module {
  func.func public @main(%x: tensor<3x5x7xf32>, %s: tensor<f32>) -> (tensor<7x3x5xf32>, tensor<f32>, tensor<0x4xf32>) {
    %t = stablehlo.transpose %x, dims = [2, 0, 1] : (tensor<3x5x7xf32>) -> tensor<7x3x5xf32>
    %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<7x3x5xf32>
    %0 = stablehlo.multiply %t, %b : tensor<7x3x5xf32>
    %1 = stablehlo.add %s, %s : tensor<f32>
    %e = stablehlo.constant dense<> : tensor<0x4xf32>
    return %0, %1, %e : tensor<7x3x5xf32>, tensor<f32>, tensor<0x4xf32>
  }
}";

fn bytes_at(ptr: *const u8, len: usize) -> Vec<u8> {
    // SAFETY: the view holds `len` bytes at `ptr` while it lives.
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

#[test]
fn a_cpu_output_is_read_in_place_row_major_and_an_empty_one_is_given_back() {
    let c = common::cpu();
    let exe = c
        .compile(TRANSPOSE_SCALE, &CompileOptions::default())
        .unwrap();
    let x: Vec<f32> = (0..105).map(|i| i as f32 * 0.5 - 3.0).collect();
    let xb = c
        .upload(&HostTensor::from_vec(vec![3, 5, 7], x.clone()))
        .unwrap();
    let sb = c
        .upload(&HostTensor::from_vec(vec![], vec![2.0f32]))
        .unwrap();

    // Row-major references computed here (a download uses the buffer's own layout, so it
    // would not tell a transposed layout apart).
    let t: Vec<f32> = (0..7)
        .flat_map(|k| (0..3).flat_map(move |i| (0..5).map(move |j| (i, j, k))))
        .map(|(i, j, k)| x[i * 35 + j * 7 + k] * 2.0)
        .collect();
    let want = [
        HostTensor::from_vec(vec![7, 3, 5], t),
        HostTensor::from_vec(vec![], vec![4.0f32]),
    ];

    let mut views = Vec::new();
    for (i, out) in exe.execute(&[&xb, &sb]).unwrap().into_iter().enumerate() {
        match out.into_host_view().unwrap() {
            Ok(view) => {
                let len = want[i].bytes().len();
                assert_eq!(view.buffer().shape(), want[i].shape());
                views.push((i, view, len));
            }
            Err(empty) => {
                assert_eq!(i, 2, "only the empty output is given back");
                assert_eq!(empty.shape(), &[0, 4]);
            }
        }
    }
    assert_eq!(views.len(), 2);
    // Later executions do not reuse or overwrite memory that is still shared.
    for _ in 0..3 {
        drop(exe.execute(&[&xb, &sb]).unwrap());
    }
    for (i, view, len) in &views {
        assert_eq!(
            bytes_at(view.as_ptr(), *len),
            want[*i].bytes(),
            "output {i}"
        );
    }
}

//! The verifier's DMA rules on hand-built IR (the DSL's types already prevent some of these
//! mistakes, e.g. element types that differ; the verifier guards every other producer), and
//! how DMA ops and HBM refs show in the text dump.

use tessera_lowering::ir::{
    check_op, DmaCopy, Loc, MemorySpace, Offset, OpKind, Operation, Type, ValueId,
};
use tessera_lowering::DType;

fn loc() -> Loc {
    Loc {
        file: "hand.rs",
        line: 7,
        column: 1,
    }
}

fn r(dtype: DType, shape: &[usize], space: MemorySpace) -> Type {
    Type::Ref {
        dtype,
        shape: shape.to_vec(),
        space,
    }
}

/// Values: %0 HBM f32[64, 128], %1 VMEM `dst`, %2 semaphores `sems`, %3 an i32 index.
fn check(dst: Type, sems: Type, copy: impl FnOnce(&mut DmaCopy)) -> Result<(), String> {
    let types = vec![
        r(DType::F32, &[64, 128], MemorySpace::Any),
        dst,
        sems,
        Type::index(),
    ];
    let mut c = DmaCopy {
        src: ValueId(0),
        src_starts: vec![Offset::Dynamic(ValueId(3)), Offset::Static(0)],
        dst: ValueId(1),
        dst_starts: vec![Offset::Static(0), Offset::Static(0)],
        sizes: vec![8, 128],
        sem: ValueId(2),
        sem_index: Offset::Static(1),
    };
    copy(&mut c);
    let op = Operation {
        results: vec![],
        kind: OpKind::DmaStart(c),
        loc: loc(),
    };
    check_op(&op, &types)
}

fn vmem() -> Type {
    r(DType::F32, &[8, 128], MemorySpace::Vmem)
}

fn sems(n: usize) -> Type {
    r(DType::I32, &[n], MemorySpace::Semaphore)
}

#[test]
fn a_well_formed_copy_verifies() {
    check(vmem(), sems(2), |_| {}).expect("verifies");
}

#[test]
fn a_copy_between_element_types_is_rejected() {
    let e = check(r(DType::I32, &[8, 128], MemorySpace::Vmem), sems(2), |_| {}).unwrap_err();
    assert!(e.contains("copies f32 into i32"), "{e}");
}

#[test]
fn a_window_out_of_range_is_rejected() {
    let e = check(vmem(), sems(2), |c| c.dst_starts[0] = Offset::Static(1)).unwrap_err();
    assert!(e.contains("destination window"), "{e}");
    assert!(e.contains("exceeds"), "{e}");
}

#[test]
fn a_semaphore_index_out_of_range_is_rejected() {
    let e = check(vmem(), sems(1), |_| {}).unwrap_err();
    assert!(e.contains("semaphore index"), "{e}");
}

#[test]
fn a_semaphore_that_is_not_in_semaphore_memory_is_rejected() {
    let e = check(vmem(), r(DType::I32, &[2], MemorySpace::Smem), |_| {}).unwrap_err();
    assert!(e.contains("1-D DMA semaphore array"), "{e}");
}

#[test]
fn loading_an_hbm_ref_is_rejected_with_the_dma_hint() {
    let types = vec![
        r(DType::F32, &[64, 128], MemorySpace::Any),
        Type::tile(DType::F32, [64, 128]),
    ];
    let op = Operation {
        results: vec![ValueId(1)],
        kind: OpKind::Load { src: ValueId(0) },
        loc: loc(),
    };
    let e = check_op(&op, &types).unwrap_err();
    assert!(
        e.contains("an HBM ref must be copied to VMEM by DMA before it is read"),
        "{e}"
    );
}

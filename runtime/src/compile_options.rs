//! Serialized `xla.CompileOptionsProto` handed to `PJRT_Client_Compile`.
//!
//! We write the few protobuf fields we need by hand (field tags + varints) rather than pull in
//! a protobuf toolchain: `executable_build_options` (field 3) with `device_ordinal` (1),
//! `num_replicas` (4) and `num_partitions` (5).

/// Options for one compile. The default compiles for one replica and one partition on the
/// client's default device, which is what single-device kernels and eager ops need.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    pub device_ordinal: i64,
    pub num_replicas: i64,
    pub num_partitions: i64,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            device_ordinal: -1,
            num_replicas: 1,
            num_partitions: 1,
        }
    }
}

impl CompileOptions {
    /// The protobuf wire bytes.
    pub fn to_proto_bytes(&self) -> Vec<u8> {
        let mut build = Vec::new();
        field_varint(&mut build, 1, self.device_ordinal as u64);
        field_varint(&mut build, 4, self.num_replicas as u64);
        field_varint(&mut build, 5, self.num_partitions as u64);
        let mut out = Vec::new();
        out.push((3 << 3) | 2); // field 3, length-delimited
        varint(&mut out, build.len() as u64);
        out.extend_from_slice(&build);
        out
    }
}

fn field_varint(out: &mut Vec<u8>, field: u8, v: u64) {
    out.push(field << 3);
    varint(out, v);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_the_measured_working_bytes() {
        // Bytes measured to work with the XLA CPU plugin and libtpu (shared/DESIGN.md).
        let want = [
            0x1a, 0x0f, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x20,
            0x01, 0x28, 0x01,
        ];
        assert_eq!(CompileOptions::default().to_proto_bytes(), want);
    }
}

//! perftest's binary parameter negotiation (≥ 6.28, `negotiate_params`): one round of
//! `struct perftest_parameters_negotiate` as it lies in memory on x86-64/aarch64 (LP64):
//!
//! - 0..28: test_method, connection_type, verb, tst, atomicType, test_type, report_fmt, each an
//!   int32 big-endian (`hton_int`); 28..32 padding;
//! - 32..40 size and 40..48 iters, u64 big-endian (`hton_64`);
//! - 48..80: aes_xts, num_of_qps, duration, use_rdma_cm, use_write_with_imm,
//!   no_enhanced_reorder, sig_offload, data_validation, int32 big-endian;
//! - 80..312: `struct ibv_device_attr` as `ibv_query_device` filled it, raw, host-endian;
//! - 312..320: mlx5dv_comp_mask, u64 big-endian, only in a build with mlx5dv (else 312 bytes).
//!
//! Checked: the struct and the `hton_int`/`hton_64` filling in `src/perftest_parameters.h` and
//! `src/perftest_communication.c` (`negotiate_params`) at 6.29, the offsets by laying the struct
//! out with the C ABI's rules (Python ctypes: 320 bytes, 312 without the mask), and
//! `ibv_device_attr` (232 bytes, `max_qp_rd_atom` at 144) by rdma-sys's bindgen layout in a
//! unit test. Of the device attributes the peer reads only `max_qp_rd_atom`, to lower its
//! outstanding reads (`compare_ibv_device`); the mask only turns off enhanced reorder
//! (`compare_mlx5dv`). Every field from test_method to data_validation must be equal, or
//! perftest prints "<field> mismatch" and fails ([`mismatches`]).
//!
//! 6.28 as released (26.01) had no data_validation: its bytes 76..80 are padding, which a 6.29
//! peer still compares. The sizes stay 320/312. Both sides send their own struct's size, so a
//! peer built without mlx5dv (312) and one with (320) desynchronise: the size to send is the
//! peer's build's, which the next slice has to learn or guess.

use anyhow::{Result, bail};

/// The struct with `mlx5dv_comp_mask` (perftest built with mlx5dv, as Debian's and most are).
pub const NEGOTIATION_LEN: usize = 320;
/// The struct without it.
pub const NEGOTIATION_LEN_NO_MLX5DV: usize = 312;
/// Where `struct ibv_device_attr` starts.
pub const DEVICE_ATTR_AT: usize = 80;
/// `sizeof(struct ibv_device_attr)` on LP64.
pub const DEVICE_ATTR_LEN: usize = 232;
/// Where its `max_qp_rd_atom` (an int, host-endian) lies in the negotiation struct.
pub const MAX_QP_RD_ATOM_AT: usize = DEVICE_ATTR_AT + 144;
/// Where `mlx5dv_comp_mask` lies, in the 320-byte form.
pub const MLX5DV_COMP_MASK_AT: usize = 312;

/// A closed set perftest sends as an int: the variants with perftest's values and the names
/// its mismatch lines print.
macro_rules! wire_enum {
    (
        $(#[$doc:meta])* $name:ident, $field:literal {
            $($variant:ident = $value:literal, $text:literal;)+
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($variant = $value,)+
        }

        impl $name {
            /// perftest's name for the value.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            fn from_wire(v: i32) -> Result<Self> {
                match v {
                    $($value => Ok(Self::$variant),)+
                    _ => bail!(
                        "the peer's parameters: {} is {v}, not a value perftest knows",
                        $field
                    ),
                }
            }
        }
    };
}

wire_enum!(
    /// `enum ctx_test_method`: one size, all sizes (`-a`), or `--run_infinitely`.
    TestMethod, "test_method" {
        Regular = 0, "RUN_REGULAR"; All = 1, "RUN_ALL"; Infinitely = 2, "RUN_INFINITELY";
    }
);
wire_enum!(
    /// perftest's connection types (`RC` … `SRD` in perftest_parameters.h).
    ConnectionType, "connection_type" {
        Rc = 0, "RC"; Uc = 1, "UC"; Ud = 2, "UD"; RawEth = 3, "RawEth"; Xrc = 4, "XRC";
        Dc = 5, "DC"; Srd = 6, "SRD";
    }
);
wire_enum!(
    /// `VerbType`.
    Verb, "verb" {
        Send = 0, "SEND"; SendImm = 1, "SEND_IMM"; Write = 2, "WRITE"; WriteImm = 3, "WRITE_IMM";
        Read = 4, "READ"; Atomic = 5, "ATOMIC";
    }
);
wire_enum!(
    /// `TestType` (the field `tst`): latency or bandwidth.
    TestKind, "tst" {
        Lat = 0, "LAT"; Bw = 1, "BW"; LatByBw = 2, "LAT_BY_BW"; FsRate = 3, "FS_RATE";
    }
);
wire_enum!(
    /// `AtomicType`; sent by every test, atomic or not.
    AtomicType, "atomicType" { CmpAndSwap = 0, "CMP_AND_SWAP"; FetchAndAdd = 1, "FETCH_AND_ADD"; }
);
wire_enum!(
    /// `TestMethod` (the field `test_type`): a count of iterations or a duration (`-D`).
    Limit, "test_type" { Iterations = 0, "ITERATIONS"; Duration = 1, "DURATION"; }
);
wire_enum!(
    /// `enum ctx_report_fmt`: the unit of the printed and reported bandwidth.
    ReportFmt, "report_fmt" { Gbps = 0, "GBS"; MBps = 1, "MBS"; }
);

impl ReportFmt {
    /// Bytes per second in one unit: Gb/s is 10^9 bits (1.25e8 bytes), MB/s is 2^20 bytes.
    pub fn bytes_per_sec(self) -> f64 {
        match self {
            ReportFmt::Gbps => 1.25e8,
            ReportFmt::MBps => 1_048_576.0,
        }
    }
}

/// One side's parameters as the negotiation carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiation {
    pub test_method: TestMethod,
    pub connection_type: ConnectionType,
    pub verb: Verb,
    pub tst: TestKind,
    pub atomic_type: AtomicType,
    pub test_type: Limit,
    pub report_fmt: ReportFmt,
    pub size: u64,
    pub iters: u64,
    pub aes_xts: bool,
    pub num_of_qps: u32,
    /// Seconds, for `-D`.
    pub duration: u32,
    pub use_rdma_cm: bool,
    pub use_write_with_imm: bool,
    pub no_enhanced_reorder: bool,
    pub sig_offload: bool,
    pub data_validation: bool,
    /// The one device attribute the peer reads.
    pub max_qp_rd_atom: i32,
    /// `Some` selects the 320-byte form.
    pub mlx5dv_comp_mask: Option<u64>,
}

/// The ints after `iters`, in order from byte 48.
const FLAGS_AT: usize = 48;

impl Negotiation {
    /// The struct, [`NEGOTIATION_LEN`] bytes with a mask, else [`NEGOTIATION_LEN_NO_MLX5DV`];
    /// padding and every device attribute but `max_qp_rd_atom` are zero.
    pub fn encode(&self) -> Vec<u8> {
        let len = match self.mlx5dv_comp_mask {
            Some(_) => NEGOTIATION_LEN,
            None => NEGOTIATION_LEN_NO_MLX5DV,
        };
        let mut out = vec![0u8; len];
        let head = [
            self.test_method as i32,
            self.connection_type as i32,
            self.verb as i32,
            self.tst as i32,
            self.atomic_type as i32,
            self.test_type as i32,
            self.report_fmt as i32,
        ];
        for (i, v) in head.into_iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&v.to_be_bytes());
        }
        out[32..40].copy_from_slice(&self.size.to_be_bytes());
        out[40..48].copy_from_slice(&self.iters.to_be_bytes());
        let flags = [
            i32::from(self.aes_xts),
            self.num_of_qps as i32,
            self.duration as i32,
            i32::from(self.use_rdma_cm),
            i32::from(self.use_write_with_imm),
            i32::from(self.no_enhanced_reorder),
            i32::from(self.sig_offload),
            i32::from(self.data_validation),
        ];
        for (i, v) in flags.into_iter().enumerate() {
            let at = FLAGS_AT + 4 * i;
            out[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
        out[MAX_QP_RD_ATOM_AT..MAX_QP_RD_ATOM_AT + 4]
            .copy_from_slice(&self.max_qp_rd_atom.to_ne_bytes());
        if let Some(mask) = self.mlx5dv_comp_mask {
            out[MLX5DV_COMP_MASK_AT..].copy_from_slice(&mask.to_be_bytes());
        }
        out
    }

    /// The peer's struct, 320 or 312 bytes. An enum value perftest does not define, or a
    /// switch other than 0 or 1, is an error naming the field.
    pub fn decode(msg: &[u8]) -> Result<Negotiation> {
        let with_mask = match msg.len() {
            NEGOTIATION_LEN => true,
            NEGOTIATION_LEN_NO_MLX5DV => false,
            n => bail!(
                "perftest's parameter negotiation is {NEGOTIATION_LEN} bytes \
                 ({NEGOTIATION_LEN_NO_MLX5DV} without mlx5dv); the peer's is {n}"
            ),
        };
        let int = |at: usize| i32::from_be_bytes(msg[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_be_bytes(msg[at..at + 8].try_into().expect("8 bytes"));
        let switch = |at: usize, name: &str| -> Result<bool> {
            match int(at) {
                0 => Ok(false),
                1 => Ok(true),
                v => bail!("the peer's parameters: {name} is {v}, not 0 (OFF) or 1 (ON)"),
            }
        };
        let flag = |i: usize| FLAGS_AT + 4 * i;
        Ok(Negotiation {
            test_method: TestMethod::from_wire(int(0))?,
            connection_type: ConnectionType::from_wire(int(4))?,
            verb: Verb::from_wire(int(8))?,
            tst: TestKind::from_wire(int(12))?,
            atomic_type: AtomicType::from_wire(int(16))?,
            test_type: Limit::from_wire(int(20))?,
            report_fmt: ReportFmt::from_wire(int(24))?,
            size: u64_at(32),
            iters: u64_at(40),
            aes_xts: switch(flag(0), "aes_xts")?,
            num_of_qps: int(flag(1)) as u32,
            duration: int(flag(2)) as u32,
            use_rdma_cm: switch(flag(3), "use_rdma_cm")?,
            use_write_with_imm: switch(flag(4), "use_write_with_imm")?,
            no_enhanced_reorder: switch(flag(5), "no_enhanced_reorder")?,
            sig_offload: switch(flag(6), "sig_offload")?,
            data_validation: switch(flag(7), "data_validation")?,
            max_qp_rd_atom: i32::from_ne_bytes(
                msg[MAX_QP_RD_ATOM_AT..MAX_QP_RD_ATOM_AT + 4]
                    .try_into()
                    .expect("4 bytes"),
            ),
            mlx5dv_comp_mask: with_mask.then(|| u64_at(MLX5DV_COMP_MASK_AT)),
        })
    }

    /// Our outstanding reads once the peer's device is known, as perftest lowers its own
    /// (`compare_ibv_device`, every connection type but DC).
    pub fn clamp_out_reads(&self, out_reads: u16) -> u16 {
        match u16::try_from(self.max_qp_rd_atom) {
            Ok(max) if self.connection_type != ConnectionType::Dc => out_reads.min(max),
            _ => out_reads,
        }
    }
}

/// ON or OFF, as perftest prints a switch.
fn on_off(b: bool) -> String {
    String::from(if b { "ON" } else { "OFF" })
}

/// Each field perftest requires equal (test_method to data_validation, in its order) that
/// differs, as one line naming it with both values; empty when the two agree.
pub fn mismatches(ours: &Negotiation, theirs: &Negotiation) -> Vec<String> {
    // Each field as perftest names it, and how it is written, for one side.
    type Field = (&'static str, fn(&Negotiation) -> String);
    let named: [Field; 17] = [
        ("test_method", |n| n.test_method.name().into()),
        ("connection_type", |n| n.connection_type.name().into()),
        ("verb", |n| n.verb.name().into()),
        ("tst", |n| n.tst.name().into()),
        ("atomicType", |n| n.atomic_type.name().into()),
        ("test_type", |n| n.test_type.name().into()),
        ("report_fmt", |n| n.report_fmt.name().into()),
        ("size", |n| n.size.to_string()),
        ("iters", |n| n.iters.to_string()),
        ("aes_xts", |n| on_off(n.aes_xts)),
        ("num_of_qps", |n| n.num_of_qps.to_string()),
        ("duration", |n| n.duration.to_string()),
        ("use_rdma_cm", |n| on_off(n.use_rdma_cm)),
        ("use_write_with_imm", |n| on_off(n.use_write_with_imm)),
        ("no_enhanced_reorder", |n| on_off(n.no_enhanced_reorder)),
        ("sig_offload", |n| on_off(n.sig_offload)),
        ("data_validation", |n| on_off(n.data_validation)),
    ];
    let fields = named.map(|(name, show)| (name, show(ours), show(theirs)));
    fields
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, a, b)| format!("{name} mismatch: ours {a}, the perftest peer's {b}"))
        .collect()
}

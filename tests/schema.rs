//! docs/json.md documents every subcommand's JSON: this host test checks the document has a
//! section per subcommand; tests/lab/schema.rs checks real output against it in the lab.

mod common;

#[test]
fn every_subcommand_has_a_json_section() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md"))
        .expect("docs/json.md");
    for sub in [
        "devices", "ports", "pingpong", "bw", "lat", "write", "read", "fabric",
    ] {
        assert!(
            doc.contains(&format!("`rdmadiag {sub} --json`")),
            "docs/json.md has no section for {sub}"
        );
    }
    let names = common::documented_json_names();
    for core in [
        "median_us",
        "bw_avg_gbps",
        "msg_rate_mpps",
        "gid",
        "default_gid_index",
    ] {
        assert!(names.contains(core), "{core} undocumented");
    }
}

//! The cloud a machine runs in, as it says so itself, offline: its DMI strings
//! (`/sys/class/dmi/id`) and the instance data cloud-init saved at boot. Never the network
//! (no metadata service), and never a file other users may not read: the serial numbers and
//! the product UUID are root's only, so they are not read even by an agent that could.
use pipetrace_core::machine::Cloud;
use std::{
    fs,
    io::Read,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

/// Where the kernel shows the firmware's DMI strings.
pub const DMI_DIR: &str = "/sys/class/dmi/id";
/// Overrides [`DMI_DIR`] (tests point it at a fixture directory). An environment variable
/// for the process, like PIPETRACE_LOG, not a setting: the kernel always shows DMI there,
/// containers included.
pub const DMI_DIR_ENV: &str = "PIPETRACE_DMI_DIR";
/// cloud-init's standardised instance data, world-readable (its sensitive twin is not).
pub const CLOUD_INIT_DATA: &str = "/run/cloud-init/instance-data.json";

/// Azure's fixed chassis asset tag: what sets an Azure VM apart from any Hyper-V guest.
const AZURE_ASSET_TAG: &str = "7783-7084-3265-9085-8269-3286-77";
/// The DMI files read: all mode 0444 in the kernel (drivers/firmware/dmi-id.c).
const DMI_FILES: [&str; 7] = [
    "sys_vendor",
    "product_name",
    "product_version",
    "board_vendor",
    "bios_vendor",
    "bios_version",
    "chassis_asset_tag",
];
/// DMI strings are short; instance data a few tens of KiB. Nothing bigger is read.
const DMI_MAX: u64 = 256;
const INSTANCE_DATA_MAX: u64 = 4 << 20;

/// The DMI directory to read: [`DMI_DIR_ENV`], else [`DMI_DIR`].
pub(crate) fn dmi_dir() -> PathBuf {
    std::env::var_os(DMI_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DMI_DIR))
}

/// The cloud as the DMI strings in `dmi_dir` and cloud-init's `instance_data` tell it.
pub(crate) fn detect(dmi_dir: &Path, instance_data: &Path) -> Cloud {
    let dmi = Dmi::read(dmi_dir);
    let provider = dmi.provider();
    let host_type = match provider {
        // A Nitro instance's product name is its type; a Xen one's is "HVM domU".
        Some("aws") => ec2_instance_type(&dmi.product_name),
        _ => None,
    };
    let region = provider.and_then(|p| region_from_instance_data(instance_data, p));
    Cloud {
        provider,
        host_type,
        region,
    }
}

/// The DMI strings used, "" where absent, unreadable or not world-readable.
#[derive(Debug, Default)]
struct Dmi {
    sys_vendor: String,
    product_name: String,
    product_version: String,
    board_vendor: String,
    bios_vendor: String,
    bios_version: String,
    chassis_asset_tag: String,
}

impl Dmi {
    fn read(dir: &Path) -> Self {
        let [
            sys_vendor,
            product_name,
            product_version,
            board_vendor,
            bios_vendor,
            bios_version,
            chassis_asset_tag,
        ] = DMI_FILES.map(|f| {
            read_public(&dir.join(f), DMI_MAX)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        });
        Self {
            sys_vendor,
            product_name,
            product_version,
            board_vendor,
            bios_vendor,
            bios_version,
            chassis_asset_tag,
        }
    }

    /// The providers' own signatures, as cloud-init's ds-identify and systemd-detect-virt
    /// read them; OTel's well-known `cloud.provider` values.
    fn provider(&self) -> Option<&'static str> {
        let amazon = [&self.sys_vendor, &self.board_vendor, &self.bios_vendor]
            .iter()
            .any(|v| v.as_str() == "Amazon EC2")
            // Xen-based instances: "4.11.amazon".
            || [&self.product_version, &self.bios_version]
                .iter()
                .any(|v| v.to_ascii_lowercase().ends_with(".amazon"));
        if amazon {
            return Some("aws");
        }
        // A Chromebook's vendor is Google too, but not its firmware.
        if self.product_name == "Google Compute Engine"
            || (self.sys_vendor == "Google" && self.bios_vendor == "Google")
        {
            return Some("gcp");
        }
        if self.chassis_asset_tag == AZURE_ASSET_TAG {
            return Some("azure");
        }
        if self.chassis_asset_tag == "OracleCloud.com" {
            return Some("oracle_cloud");
        }
        if self.product_name == "Alibaba Cloud ECS" {
            return Some("alibaba_cloud");
        }
        None
    }
}

/// A file's text if every user may read it (the agent, as root, could read more), at most
/// `max` bytes.
fn read_public(path: &Path, max: u64) -> Option<String> {
    let meta = fs::metadata(path).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o004 == 0 {
        return None;
    }
    let mut text = String::new();
    fs::File::open(path)
        .ok()?
        .take(max)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// An EC2 instance type (`m5.large`, `c7i.metal-24xl`, `u-6tb1.metal`), else None: DMI
/// placeholders such as "Not Specified" are no type.
fn ec2_instance_type(s: &str) -> Option<String> {
    let (family, size) = s.split_once('.')?;
    let part = |p: &str| {
        p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    let ok = family.starts_with(|c: char| c.is_ascii_lowercase()) && part(family) && part(size);
    ok.then(|| s.to_string())
}

/// `v1.region` of cloud-init's instance data, when its `v1.cloud_name` is `provider`'s.
fn region_from_instance_data(path: &Path, provider: &str) -> Option<String> {
    let text = read_public(path, INSTANCE_DATA_MAX)?;
    let data: serde_json::Value = serde_json::from_str(&text).ok()?;
    let v1 = data.get("v1")?;
    let cloud = match v1.get("cloud_name")?.as_str()? {
        "aws" => "aws",
        "gce" => "gcp",
        "azure" => "azure",
        "oracle" => "oracle_cloud",
        "aliyun" => "alibaba_cloud",
        _ => return None,
    };
    let region = v1.get("region")?.as_str()?.trim();
    let plausible = !region.is_empty()
        && region.len() <= 64
        && region
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    (cloud == provider && plausible).then(|| region.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DMI directory holding `files`, world-readable.
    fn dmi(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            fs::write(&p, format!("{text}\n")).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
        }
        dir
    }

    fn detect(d: &tempfile::TempDir) -> Cloud {
        super::detect(d.path(), &d.path().join("no-instance-data.json"))
    }

    #[test]
    fn ec2_nitro_names_its_instance_type() {
        let d = dmi(&[
            ("sys_vendor", "Amazon EC2"),
            ("product_name", "m5.large"),
            ("board_vendor", "Amazon EC2"),
            ("bios_vendor", "Amazon EC2"),
            ("chassis_asset_tag", "Amazon EC2"),
        ]);
        let c = detect(&d);
        assert_eq!(c.provider, Some("aws"));
        assert_eq!(c.host_type.as_deref(), Some("m5.large"));
        assert_eq!(c.region, None, "no offline source of the region here");
    }

    #[test]
    fn ec2_types_and_placeholders() {
        for t in [
            "m5.large",
            "c7i.metal-24xl",
            "u-6tb1.metal",
            "mac2-m2pro.metal",
        ] {
            assert_eq!(ec2_instance_type(t).as_deref(), Some(t));
        }
        for t in [
            "Not Specified",
            "HVM domU",
            "",
            ".large",
            "m5.",
            "M5.LARGE",
            "m5 .large",
        ] {
            assert_eq!(ec2_instance_type(t), None, "{t:?}");
        }
    }

    #[test]
    fn ec2_on_xen_is_aws_without_a_type() {
        let d = dmi(&[
            ("sys_vendor", "Xen"),
            ("product_name", "HVM domU"),
            ("product_version", "4.11.amazon"),
            ("bios_vendor", "Xen"),
            ("bios_version", "4.11.amazon"),
        ]);
        let c = detect(&d);
        assert_eq!(c.provider, Some("aws"));
        assert_eq!(c.host_type, None);
    }

    #[test]
    fn gce_has_no_machine_type_in_dmi() {
        let d = dmi(&[
            ("sys_vendor", "Google"),
            ("product_name", "Google Compute Engine"),
            ("board_vendor", "Google"),
            ("bios_vendor", "Google"),
        ]);
        assert_eq!(
            detect(&d),
            Cloud {
                provider: Some("gcp"),
                ..Default::default()
            }
        );
        // A Chromebook: Google's, but no cloud.
        let d = dmi(&[
            ("sys_vendor", "Google"),
            ("product_name", "Eve"),
            ("bios_vendor", "coreboot"),
        ]);
        assert_eq!(detect(&d), Cloud::default());
    }

    #[test]
    fn azure_by_its_chassis_asset_tag_not_by_hyper_v_alone() {
        let hyper_v = [
            ("sys_vendor", "Microsoft Corporation"),
            ("product_name", "Virtual Machine"),
            ("board_vendor", "Microsoft Corporation"),
            ("bios_vendor", "Microsoft Corporation"),
        ];
        let mut azure = hyper_v.to_vec();
        azure.push(("chassis_asset_tag", AZURE_ASSET_TAG));
        let c = detect(&dmi(&azure));
        assert_eq!(c.provider, Some("azure"));
        assert_eq!(c.host_type, None, "Azure's VM size is not in DMI");
        let mut on_prem = hyper_v.to_vec();
        on_prem.push(("chassis_asset_tag", "4867-2290-1478-6613-2937-1452-55"));
        assert_eq!(detect(&dmi(&on_prem)), Cloud::default());
    }

    #[test]
    fn oracle_and_alibaba() {
        let d = dmi(&[("chassis_asset_tag", "OracleCloud.com")]);
        assert_eq!(detect(&d).provider, Some("oracle_cloud"));
        let d = dmi(&[
            ("sys_vendor", "Alibaba Cloud"),
            ("product_name", "Alibaba Cloud ECS"),
        ]);
        assert_eq!(detect(&d).provider, Some("alibaba_cloud"));
    }

    #[test]
    fn bare_metal_and_no_dmi_tell_nothing() {
        let d = dmi(&[
            ("sys_vendor", "Dell Inc."),
            ("product_name", "PowerEdge R640"),
            ("board_vendor", "Dell Inc."),
            ("bios_vendor", "Dell Inc."),
            ("chassis_asset_tag", "Not Specified"),
        ]);
        assert_eq!(detect(&d), Cloud::default());
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(detect(&empty), Cloud::default());
        let missing = empty.path().join("absent");
        assert_eq!(super::detect(&missing, &missing), Cloud::default());
    }

    #[test]
    fn a_file_only_root_may_read_is_not_read() {
        let d = dmi(&[("sys_vendor", "Microsoft Corporation")]);
        let tag = d.path().join("chassis_asset_tag");
        fs::write(&tag, AZURE_ASSET_TAG).unwrap();
        fs::set_permissions(&tag, fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(detect(&d), Cloud::default());
    }

    #[test]
    fn region_from_cloud_init_only_for_the_same_cloud() {
        let d = dmi(&[("sys_vendor", "Amazon EC2"), ("product_name", "c6g.xlarge")]);
        let data = d.path().join("instance-data.json");
        let write = |json: &str, mode: u32| {
            fs::write(&data, json).unwrap();
            fs::set_permissions(&data, fs::Permissions::from_mode(mode)).unwrap();
        };
        write(
            r#"{"v1": {"cloud_name": "aws", "region": "eu-west-1", "platform": "ec2"}}"#,
            0o644,
        );
        let c = super::detect(d.path(), &data);
        assert_eq!(c.provider, Some("aws"));
        assert_eq!(c.host_type.as_deref(), Some("c6g.xlarge"));
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        // Another cloud's data, a region of null, no JSON, root-only: no region.
        for (json, mode) in [
            (
                r#"{"v1": {"cloud_name": "gce", "region": "us-central1"}}"#,
                0o644,
            ),
            (r#"{"v1": {"cloud_name": "aws", "region": null}}"#, 0o644),
            ("not json", 0o644),
            (
                r#"{"v1": {"cloud_name": "aws", "region": "eu-west-1"}}"#,
                0o600,
            ),
        ] {
            write(json, mode);
            assert_eq!(super::detect(d.path(), &data).region, None, "{json}");
        }
        // GCE's cloud-init name is "gce".
        let g = dmi(&[("product_name", "Google Compute Engine")]);
        let data = g.path().join("instance-data.json");
        fs::write(
            &data,
            r#"{"v1": {"cloud_name": "gce", "region": "us-central1"}}"#,
        )
        .unwrap();
        fs::set_permissions(&data, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            super::detect(g.path(), &data).region.as_deref(),
            Some("us-central1")
        );
    }
}

//! The instance table: shapes and hourly prices per cloud and region, shipped in
//! collector/data/instances.csv or the user's own file in the same format (docs/sizing.md).
use std::{collections::BTreeSet, path::Path};

use serde::Serialize;

/// The table shipped with pipetrace, read at build time: no file or network at run time.
pub const BUILTIN: &str = include_str!("../../data/instances.csv");

/// The header line every table has, columns in this order.
pub const HEADER: &str = "cloud,region,type,family,vcpus,memory_gib,nvme_gib,gpus,gpu_memory_gib,network_gbps,on_demand_usd,spot_usd";

/// What a machine is built for, as the providers group their families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    General,
    Compute,
    Memory,
    Storage,
    Gpu,
}

impl Family {
    const ALL: [(&'static str, Family); 5] = [
        ("general", Family::General),
        ("compute", Family::Compute),
        ("memory", Family::Memory),
        ("storage", Family::Storage),
        ("gpu", Family::Gpu),
    ];

    pub(crate) fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("", |(n, _)| n)
    }

    fn parse(s: &str) -> Option<Family> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, f)| *f)
    }
}

/// One instance type in one region.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Instance {
    pub cloud: String,
    pub region: String,
    #[serde(rename = "type")]
    pub name: String,
    pub family: Family,
    pub vcpus: u32,
    pub memory_gib: f64,
    /// Local NVMe (or local SSD) storage; 0 when it has none.
    pub nvme_gib: f64,
    pub gpus: u32,
    /// Per GPU.
    pub gpu_memory_gib: f64,
    pub network_gbps: f64,
    pub on_demand_usd: f64,
    pub spot_usd: f64,
}

/// A parsed table: its instances, the date its prices are from and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    pub instances: Vec<Instance>,
    /// From the `# date:` line; "undated" without one.
    pub date: String,
    /// `built-in` or the user's file.
    pub origin: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("instance table {origin}, line {line}: {message}")]
    Line {
        origin: String,
        line: usize,
        message: String,
    },
    #[error(
        "instance table {origin}: no header line; the first line that is not a `#` comment must \
         be `{HEADER}`"
    )]
    NoHeader { origin: String },
    #[error(
        "instance table {origin}: no instances under its header; add a row per type and region"
    )]
    Empty { origin: String },
    #[error("instance table {path}: {source}; check sizing.instances")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "sizing.{key}: `{wanted}` is not in the instance table {origin} (it has: {has}); fix the \
         name or add its rows to the table"
    )]
    Filter {
        key: &'static str,
        wanted: String,
        origin: String,
        has: String,
    },
    #[error(
        "sizing.clouds [{clouds}] and sizing.regions [{regions}]: no instance is in both; name \
         regions of those clouds"
    )]
    NothingLeft { clouds: String, regions: String },
}

impl Catalog {
    pub(crate) fn builtin() -> Self {
        Self::parse(BUILTIN, "built-in").expect("collector/data/instances.csv parses")
    }

    pub(crate) fn read(path: &Path) -> Result<Self, TableError> {
        let text = std::fs::read_to_string(path).map_err(|source| TableError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    pub(crate) fn parse(text: &str, origin: &str) -> Result<Self, TableError> {
        let mut date = None;
        let mut header = false;
        let mut instances = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if let Some(comment) = line.strip_prefix('#') {
                if let Some(d) = comment.trim().strip_prefix("date:") {
                    date = Some(d.trim().to_string());
                }
                continue;
            }
            if line.is_empty() {
                continue;
            }
            let fail = |message: String| TableError::Line {
                origin: origin.to_string(),
                line: i + 1,
                message,
            };
            if !header {
                if line.replace(' ', "") != HEADER {
                    return Err(fail(format!("the header must be `{HEADER}`, not `{line}`")));
                }
                header = true;
                continue;
            }
            let inst = row(line).map_err(fail)?;
            let key = (inst.cloud.clone(), inst.region.clone(), inst.name.clone());
            if !seen.insert(key) {
                let why = format!(
                    "{} in {} is listed twice; keep one row",
                    inst.name, inst.region
                );
                return Err(fail(why));
            }
            instances.push(inst);
        }
        let origin = origin.to_string();
        match (header, instances.is_empty()) {
            (false, _) => Err(TableError::NoHeader { origin }),
            (true, true) => Err(TableError::Empty { origin }),
            _ => Ok(Self {
                instances,
                date: date.unwrap_or_else(|| "undated".into()),
                origin,
            }),
        }
    }

    /// Only the instances of these clouds and regions (all where a list is empty); a name the
    /// table lacks is an error, not an empty choice.
    pub(crate) fn filtered(
        mut self,
        clouds: &[String],
        regions: &[String],
    ) -> Result<Self, TableError> {
        for (key, wanted, of) in [
            (
                "clouds",
                clouds,
                (|i: &Instance| i.cloud.clone()) as fn(&Instance) -> String,
            ),
            ("regions", regions, |i: &Instance| i.region.clone()),
        ] {
            let has: BTreeSet<String> = self.instances.iter().map(of).collect();
            if let Some(w) = wanted.iter().find(|w| !has.contains(*w)) {
                return Err(TableError::Filter {
                    key,
                    wanted: w.clone(),
                    origin: self.origin.clone(),
                    has: has.into_iter().collect::<Vec<_>>().join(", "),
                });
            }
        }
        let keep = |list: &[String], v: &String| list.is_empty() || list.contains(v);
        self.instances
            .retain(|i| keep(clouds, &i.cloud) && keep(regions, &i.region));
        if self.instances.is_empty() {
            return Err(TableError::NothingLeft {
                clouds: clouds.join(", "),
                regions: regions.join(", "),
            });
        }
        Ok(self)
    }
}

/// One row; the error says which column is wrong and how.
fn row(line: &str) -> Result<Instance, String> {
    let cells: Vec<&str> = line.split(',').map(str::trim).collect();
    if cells.len() != 12 {
        return Err(format!(
            "{} columns where the header has 12 ({HEADER})",
            cells.len()
        ));
    }
    let text = |i: usize, name: &str| match cells[i] {
        "" => Err(format!("{name} is empty")),
        s => Ok(s.to_string()),
    };
    let num = |i: usize, name: &str| -> Result<f64, String> {
        match cells[i].parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(format!(
                "{name} `{}` is not a number of at least 0",
                cells[i]
            )),
        }
    };
    let whole = |i: usize, name: &str| -> Result<u32, String> {
        cells[i]
            .parse::<u32>()
            .map_err(|_| format!("{name} `{}` is not a whole number", cells[i]))
    };
    let family = Family::parse(cells[3]).ok_or_else(|| {
        let names: Vec<&str> = Family::ALL.iter().map(|(n, _)| *n).collect();
        format!("family `{}` is not one of {}", cells[3], names.join(", "))
    })?;
    let inst = Instance {
        cloud: text(0, "cloud")?,
        region: text(1, "region")?,
        name: text(2, "type")?,
        family,
        vcpus: whole(4, "vcpus")?,
        memory_gib: num(5, "memory_gib")?,
        nvme_gib: num(6, "nvme_gib")?,
        gpus: whole(7, "gpus")?,
        gpu_memory_gib: num(8, "gpu_memory_gib")?,
        network_gbps: num(9, "network_gbps")?,
        on_demand_usd: num(10, "on_demand_usd")?,
        spot_usd: num(11, "spot_usd")?,
    };
    if inst.vcpus == 0 || inst.memory_gib <= 0.0 {
        return Err("vcpus and memory_gib must be above 0".into());
    }
    if inst.spot_usd > inst.on_demand_usd {
        return Err(format!(
            "spot_usd {} is above on_demand_usd {}: are the last two columns swapped?",
            inst.spot_usd, inst.on_demand_usd
        ));
    }
    if (inst.gpus > 0) != (inst.family == Family::Gpu) {
        return Err("gpus above 0 exactly when the family is gpu".into());
    }
    Ok(inst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_dated_with_every_cloud_and_family() {
        let c = Catalog::builtin();
        assert_eq!(c.date, "2026-11-28");
        let clouds: BTreeSet<&str> = c.instances.iter().map(|i| i.cloud.as_str()).collect();
        assert_eq!(clouds, ["aws", "azure", "gcp"].into());
        for cloud in clouds {
            let of = |f| {
                c.instances
                    .iter()
                    .any(|i| i.cloud == cloud && i.family == f)
            };
            let regions: BTreeSet<&str> = (c.instances.iter())
                .filter(|i| i.cloud == cloud)
                .map(|i| i.region.as_str())
                .collect();
            assert!(regions.len() >= 2, "{cloud}: {regions:?}");
            for (_, f) in Family::ALL {
                assert!(of(f), "{cloud} has no {f:?} family");
            }
        }
        assert!(c.instances.iter().all(|i| i.spot_usd < i.on_demand_usd));
        let nvme = |i: &Instance| i.family != Family::Storage || i.nvme_gib > 0.0;
        assert!(c.instances.iter().all(nvme));
    }

    fn table(rows: &str) -> String {
        format!("# date: 2026-01-02\n{HEADER}\n{rows}")
    }

    #[test]
    fn a_wrong_row_names_its_line_and_what_to_fix() {
        let err = |rows: &str| {
            Catalog::parse(&table(rows), "mine.csv")
                .unwrap_err()
                .to_string()
        };
        let ok = "aws,us-east-1,m7i.large,general,2,8,0,0,0,12.5,0.1,0.05\n";
        let e = err(&format!("{ok}aws,us-east-1,x,general,2,8,0,0,0,12.5,0.1\n"));
        assert!(e.contains("mine.csv, line 4: 11 columns"), "{e}");
        let e = err("aws,us-east-1,x,huge,2,8,0,0,0,12.5,0.1,0.05\n");
        assert!(
            e.contains("family `huge` is not one of general, compute"),
            "{e}"
        );
        let e = err("aws,us-east-1,x,general,two,8,0,0,0,12.5,0.1,0.05\n");
        assert!(e.contains("vcpus `two` is not a whole number"), "{e}");
        let e = err("aws,us-east-1,x,general,2,8,0,0,0,12.5,0.05,0.1\n");
        assert!(e.contains("swapped"), "{e}");
        let e = err(&format!("{ok}{ok}"));
        assert!(
            e.contains("line 4: m7i.large in us-east-1 is listed twice"),
            "{e}"
        );
        let e = err("aws,us-east-1,x,general,2,-8,0,0,0,12.5,0.1,0.05\n");
        assert!(
            e.contains("memory_gib `-8` is not a number of at least 0"),
            "{e}"
        );
        let e = Catalog::parse("# date: x\ncloud,type\n", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: the header must be"), "{e}");
        let e = Catalog::parse(&table(""), "t").unwrap_err().to_string();
        assert!(e.contains("no instances under its header"), "{e}");
        let e = Catalog::parse("# only a comment\n", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no header line"), "{e}");
    }

    #[test]
    fn filters_keep_their_clouds_and_regions_and_an_unknown_name_is_an_error() {
        let c = Catalog::builtin();
        let aws = c.clone().filtered(&["aws".into()], &[]).unwrap();
        assert!(aws.instances.iter().all(|i| i.cloud == "aws"));
        let one = (c.clone()).filtered(&[], &["europe-west4".into()]).unwrap();
        assert!(one.instances.iter().all(|i| i.region == "europe-west4"));
        let e = c
            .clone()
            .filtered(&["oci".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sizing.clouds: `oci` is not in the instance table built-in"),
            "{e}"
        );
        assert!(e.contains("aws, azure, gcp"), "{e}");
        let e = (c.filtered(&["aws".into()], &["eastus".into()]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no instance is in both"), "{e}");
    }
}

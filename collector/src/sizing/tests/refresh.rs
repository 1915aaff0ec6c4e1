//! scripts/refresh-instances.py on small files in the providers' formats, written here: its
//! output is a table pipetrace reads, with the prices of those files.
use std::path::Path;

use serde_json::json;

use crate::sizing::{Catalog, table::HEADER};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scripts/refresh-instances.py"
);

fn write(dir: &Path, name: &str, v: serde_json::Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, v.to_string()).unwrap();
    path.display().to_string()
}

fn aws_files(dir: &Path) -> Vec<String> {
    let linux = json!({"instanceType": "m7i.large", "regionCode": "us-east-1",
        "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
        "capacitystatus": "Used"});
    let mut windows = linux.clone();
    windows["operatingSystem"] = json!("Windows");
    let term =
        |usd: &str| json!({"T1": {"priceDimensions": {"R1": {"pricePerUnit": {"USD": usd}}}}});
    let offer = json!({
        "products": {"A": {"attributes": linux}, "B": {"attributes": windows}},
        "terms": {"OnDemand": {"A": term("0.111"), "B": term("0.999")}}
    });
    let spot = |az: &str, p: &str| {
        json!({"AvailabilityZone": az, "InstanceType": "m7i.large",
        "ProductDescription": "Linux/UNIX", "SpotPrice": p})
    };
    let history = json!({"SpotPriceHistory": [
        spot("us-east-1a", "0.040"), spot("us-east-1b", "0.050"), spot("us-east-1c", "0.090")]});
    vec![
        "--aws-offer".into(),
        write(dir, "aws.json", offer),
        "--aws-spot".into(),
        write(dir, "spot.json", history),
    ]
}

fn azure_file(dir: &Path) -> Vec<String> {
    let item = |meter: &str, product: &str, price: f64| {
        json!({"armRegionName": "eastus",
        "armSkuName": "Standard_D2s_v5", "meterName": meter, "productName": product,
        "retailPrice": price, "unitOfMeasure": "1 Hour", "type": "Consumption"})
    };
    let series = "Virtual Machines Dsv5 Series";
    let page = json!({"Items": [
        item("D2s v5", series, 0.101),
        item("D2s v5 Spot", series, 0.021),
        item("D2s v5 Low Priority", series, 0.011),
        item("D2s v5", &format!("{series} Windows"), 0.5),
    ]});
    vec!["--azure".into(), write(dir, "azure.json", page)]
}

fn gcp_file(dir: &Path) -> Vec<String> {
    let sku = |desc: &str, usage: &str, nanos: u64| {
        json!({"description": desc,
        "category": {"usageType": usage}, "serviceRegions": ["us-central1"],
        "pricingInfo": [{"pricingExpression": {"tieredRates":
            [{"unitPrice": {"units": "0", "nanos": nanos}}]}}]})
    };
    let skus = json!({"skus": [
        sku("N2 Instance Core running in Americas", "OnDemand", 30_000_000),
        sku("N2 Instance Ram running in Americas", "OnDemand", 4_000_000),
        sku("Spot Preemptible N2 Instance Core running in Americas", "Preemptible", 10_000_000),
        sku("Spot Preemptible N2 Instance Ram running in Americas", "Preemptible", 1_000_000),
    ]});
    vec!["--gcp".into(), write(dir, "gcp.json", skus)]
}

#[test]
fn the_refresh_script_turns_price_files_into_a_table_pipetrace_reads() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("old.csv");
    let rows = "aws,us-east-1,m7i.large,general,2,8,0,0,0,12.5,0.1,0.05\n\
                azure,eastus,Standard_D2s_v5,general,2,8,0,0,0,12.5,0.1,0.05\n\
                gcp,us-central1,n2-standard-2,general,2,8,0,0,0,10,0.1,0.05\n\
                gcp,us-central1,c9-unknown-2,compute,2,4,0,0,0,10,0.3,0.2\n";
    std::fs::write(
        &table,
        format!("# date: 2020-01-01\n# sources: here\n{HEADER}\n{rows}"),
    )
    .unwrap();
    let out = dir.path().join("new.csv");
    let mut args = vec!["--table".to_string(), table.display().to_string()];
    args.extend(aws_files(dir.path()));
    args.extend(azure_file(dir.path()));
    args.extend(gcp_file(dir.path()));
    args.extend(["--date", "2026-12-01", "-o"].map(String::from));
    args.push(out.display().to_string());
    let o = std::process::Command::new("python3")
        .arg(SCRIPT)
        .args(&args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("no new price for gcp us-central1 c9-unknown-2"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("# sources: here\n"),
        "comments are kept: {text}"
    );
    let c = Catalog::parse(&text, "new.csv").unwrap();
    assert_eq!(c.date, "2026-12-01");
    let price = |name: &str| {
        let i = c.instances.iter().find(|i| i.name == name).unwrap();
        (i.on_demand_usd, i.spot_usd)
    };
    assert_eq!(
        price("m7i.large"),
        (0.111, 0.05),
        "Linux only; the median spot"
    );
    assert_eq!(
        price("Standard_D2s_v5"),
        (0.101, 0.021),
        "Linux, Spot, not Low Priority"
    );
    // 2 vCPUs and 8 GiB at the SKUs' rates.
    assert_eq!(price("n2-standard-2"), (0.092, 0.028));
    assert_eq!(price("c9-unknown-2"), (0.3, 0.2), "kept as it was");
}

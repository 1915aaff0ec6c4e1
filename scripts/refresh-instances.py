#!/usr/bin/env python3
"""Refresh the prices of pipetrace's instance table from the providers' public price files.

The table (collector/data/instances.csv, docs/sizing.md) decides which instance types and
regions are listed and their shapes; this script takes their hourly on-demand and spot prices
from files you downloaded, and writes the table again with a new date. It never goes to the
network itself. Rows no file prices keep their old prices and are named on stderr.

  scripts/refresh-instances.py --table collector/data/instances.csv \\
      --aws-offer us-east-1.json --aws-spot spot-us-east-1.json \\
      --azure azure-eastus.json --gcp gcp-skus.json --date 2026-12-01 -o new.csv

Files, as the providers publish them:
  --aws-offer  an AWS Price List bulk offer file of AmazonEC2 for one region (index.json):
               Linux, shared tenancy, no pre-installed software, on-demand terms.
  --aws-spot   `aws ec2 describe-spot-price-history --product-descriptions Linux/UNIX` output;
               the median price per type and region (zones folded into their region).
  --azure      pages of the Azure Retail Prices API (prices.azure.com/api/retail/prices),
               Virtual Machines: Linux consumption meters, `... Spot` meters for spot.
  --gcp        Compute Engine SKUs from the Cloud Billing Catalog API (or the pricing export
               as JSON): per vCPU-hour, per GiB-hour, per GPU-hour and local SSD per GiB-month,
               summed over the type's shape.
Each option may be given several times.
"""
import argparse
import json
import re
import statistics
import sys

HEADER = ("cloud,region,type,family,vcpus,memory_gib,nvme_gib,gpus,gpu_memory_gib,"
          "network_gbps,on_demand_usd,spot_usd")

# GCP: how a series' SKUs are described, and the GPU its types carry.
GCP_SERIES = {"n2": "N2 Instance", "c2": "Compute optimized", "c3": "C3 Instance",
              "g2": "G2 Instance", "n2d": "N2D AMD Instance", "e2": "E2 Instance"}
GCP_GPUS = {"g2": "Nvidia L4 GPU"}
HOURS_PER_MONTH = 730.0


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def aws_on_demand(paths):
    """{(region, type): USD per hour} from offer files."""
    prices = {}
    for path in paths:
        offer = load_json(path)
        terms = offer.get("terms", {}).get("OnDemand", {})
        for sku, product in offer.get("products", {}).items():
            a = product.get("attributes", {})
            wanted = (a.get("operatingSystem") == "Linux" and a.get("tenancy") == "Shared"
                      and a.get("preInstalledSw", "NA") == "NA"
                      and a.get("capacitystatus", "Used") == "Used")
            if not wanted or "instanceType" not in a:
                continue
            for term in terms.get(sku, {}).values():
                for dim in term.get("priceDimensions", {}).values():
                    usd = float(dim.get("pricePerUnit", {}).get("USD", "0"))
                    if usd > 0:
                        prices[(a.get("regionCode", ""), a["instanceType"])] = usd
    return prices


def aws_spot(paths):
    """{(region, type): median USD per hour} from spot price history."""
    seen = {}
    for path in paths:
        for h in load_json(path).get("SpotPriceHistory", []):
            if "Linux/UNIX" not in h.get("ProductDescription", "Linux/UNIX"):
                continue
            region = re.sub(r"[a-z]$", "", h["AvailabilityZone"])
            seen.setdefault((region, h["InstanceType"]), []).append(float(h["SpotPrice"]))
    return {k: statistics.median(v) for k, v in seen.items()}


def azure(paths):
    """({(region, type): on-demand}, {(region, type): spot}) from retail price pages."""
    on_demand, spot = {}, {}
    for path in paths:
        for item in load_json(path).get("Items", []):
            meter, product = item.get("meterName", ""), item.get("productName", "")
            if (item.get("type") != "Consumption" or "Windows" in product
                    or "Low Priority" in meter or item.get("unitOfMeasure") != "1 Hour"):
                continue
            key = (item["armRegionName"], item["armSkuName"])
            (spot if meter.endswith("Spot") else on_demand)[key] = float(item["retailPrice"])
    return on_demand, spot


def gcp_rates(paths):
    """{(region, description without the spot prefix, spot?): USD per unit}."""
    rates = {}
    for path in paths:
        for sku in load_json(path).get("skus", []):
            usage = sku.get("category", {}).get("usageType", "")
            if usage not in ("OnDemand", "Preemptible"):
                continue
            info = sku.get("pricingInfo", [{}])[0].get("pricingExpression", {})
            tiers = info.get("tieredRates", [])
            if not tiers:
                continue
            unit = tiers[-1]["unitPrice"]
            usd = int(unit.get("units", "0")) + unit.get("nanos", 0) / 1e9
            desc = re.sub(r"^Spot Preemptible ", "", sku["description"])
            desc = desc.replace(" attached to Spot Preemptible VMs", "")
            desc = re.sub(r" running in .*$", "", desc)
            for region in sku.get("serviceRegions", []):
                rates[(region, desc, usage == "Preemptible")] = usd
    return rates


def gcp_price(row, rates, spot):
    """A type's hourly price summed from its series' rates; None when one is missing."""
    series = row["type"].split("-")[0]
    name = GCP_SERIES.get(series)
    if name is None:
        return None
    parts = [(f"{name} Core", float(row["vcpus"])), (f"{name} Ram", float(row["memory_gib"]))]
    if int(row["gpus"]) > 0:
        parts.append((GCP_GPUS.get(series, ""), float(row["gpus"])))
    if float(row["nvme_gib"]) > 0:
        parts.append(("SSD backed Local Storage", float(row["nvme_gib"]) / HOURS_PER_MONTH))
    total = 0.0
    for desc, amount in parts:
        rate = rates.get((row["region"], desc, spot))
        if rate is None:
            return None
        total += rate * amount
    return round(total, 4)


def read_table(path):
    """(comment lines, rows as dicts)."""
    comments, rows, columns = [], [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                comments.append(line)
            elif line.strip() and columns is None:
                columns = line.replace(" ", "").split(",")
                if ",".join(columns) != HEADER:
                    sys.exit(f"{path}: the header must be {HEADER}")
            elif line.strip():
                rows.append(dict(zip(columns, line.split(","))))
    return comments, rows


def refresh(rows, sources):
    """New prices into rows; the keys of rows left as they were."""
    aws_od, aws_sp, az_od, az_sp, gcp = sources
    stale = []
    for row in rows:
        key = (row["region"], row["type"])
        if row["cloud"] == "aws":
            od, sp = aws_od.get(key), aws_sp.get(key)
        elif row["cloud"] == "azure":
            od, sp = az_od.get(key), az_sp.get(key)
        elif row["cloud"] == "gcp":
            od, sp = gcp_price(row, gcp, False), gcp_price(row, gcp, True)
        else:
            od = sp = None
        if od is not None:
            row["on_demand_usd"] = f"{od:g}"
        if sp is not None:
            row["spot_usd"] = f"{sp:g}"
        if od is None or sp is None:
            stale.append(f"{row['cloud']} {row['region']} {row['type']}")
    return stale


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True, help="the table to refresh")
    p.add_argument("--aws-offer", action="append", default=[])
    p.add_argument("--aws-spot", action="append", default=[])
    p.add_argument("--azure", action="append", default=[])
    p.add_argument("--gcp", action="append", default=[])
    p.add_argument("--date", required=True, help="the date of the price files, YYYY-MM-DD")
    p.add_argument("-o", "--output", help="where to write (default: stdout)")
    a = p.parse_args()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", a.date):
        sys.exit(f"--date {a.date}: write it as YYYY-MM-DD")
    comments, rows = read_table(a.table)
    az_od, az_sp = azure(a.azure)
    sources = (aws_on_demand(a.aws_offer), aws_spot(a.aws_spot), az_od, az_sp, gcp_rates(a.gcp))
    stale = refresh(rows, sources)
    for row in rows:
        if float(row["spot_usd"]) > float(row["on_demand_usd"]):
            row["spot_usd"] = row["on_demand_usd"]
    comments = [f"# date: {a.date}" if c.startswith("# date:") else c for c in comments]
    lines = comments + [HEADER] + [",".join(r[c] for c in HEADER.split(",")) for r in rows]
    text = "\n".join(lines) + "\n"
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    for s in stale:
        print(f"refresh-instances: no new price for {s}; its old price is kept", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Hourly prices (USD per node-hour) of machine types common on training clusters.

Data only (no imports): ``teardown_cost`` prices a cluster's node pools with it, after merging a
user's price file over it.

Date and source: Google's list prices for us-central1 as recorded in the Cloud Billing catalog
on 2025-03-06, retrieved 2026-12 from a public compilation of that catalog
(``COMPILATION``). They are the SKUs priced on Google's pages (``SOURCES``):
https://cloud.google.com/compute/vm-instance-pricing (machine types),
https://cloud.google.com/compute/gpus-pricing (the GPUs inside A2, A3 and G2 machines) and
https://cloud.google.com/spot-vms/pricing (Spot). Prices change, and Spot prices change often;
a figure that matters should come from a price file.

Regions: the figures are us-central1's; us-east1 and us-west1 list the same prices for every
machine type below. Other regions get the same figures with a note in every computed result:
list prices there are often higher (GPU machines by up to about 60%), so a price file should
give exact ones.

Provisioning models (the ``provisioningModel`` values of a node pool):

* ``ON_DEMAND`` (Compute Engine calls it STANDARD, accepted as an alias in price files): the
  machine's list price.
* ``SPOT``: the Spot price recorded on the same date.
* ``FLEX_START``: the table has no figure (its discount is not recorded here); a FLEX_START pool
  that keeps nodes needs a price file entry or an explicit ``idle_price_per_hour``.
* ``RESERVATION``: 0, the marginal cost: the reservation is paid whether or not the cluster
  keeps its nodes. A reservation released along with the cluster is not free; give its price in
  a price file.

How each figure was derived:

* n2-standard-2, -4, -32 and g2-standard-4, -8, -16, -24, -32, -48, -96, a2-highgpu-1g, -2g,
  -4g, -8g, a2-ultragpu-8g and a3-highgpu-8g: the listed figures, rounded to 6 decimals.
* n2-standard-8 and -16: from the N2 rates the listed shapes agree on: on demand 0.031611 per
  vCPU-hour + 0.004237 per GiB-hour, Spot 0.00976 per vCPU-hour + 0.001307 per GiB-hour
  (n2-standard-2 = 2 vCPU + 8 GiB = 0.097118 on demand, 0.029976 Spot).
* g2-standard-12: half of g2-standard-24, which has twice its vCPUs, memory and L4 GPUs. It
  agrees with the listed shapes: one L4 plus 0.036698004 on demand (0.014208 Spot) for each vCPU
  with its 4 GiB.
* The a2-highgpu figures equal the A2 rates on demand: 0.031611 per vCPU-hour, 0.004237 per
  GiB-hour and 2.933908 per A100 40GB GPU-hour (a2-highgpu-1g = 12 vCPU + 85 GiB + 1 GPU =
  3.673385; the larger shapes are 2, 4 and 8 times it).
* a3-megagpu-8g: not offered in us-central1; the figures are us-east4's (a region with A3 Mega).
* a2-ultragpu-1g, -2g, -4g: 1/8, 2/8 and 4/8 of a2-ultragpu-8g, whose vCPUs, memory and A100
  80GB GPUs they hold in those shares (12 vCPU, 170 GB and 1 GPU per eighth).
* a2-megagpu-16g: the A2 on-demand rates above for its 96 vCPU, 1360 GiB and 16 A100 40GB
  (= twice a2-highgpu-8g less 96 vCPU: 55.739504); no Spot figure (its GPU's Spot rate is not
  recorded here).
* a3-ultragpu-8g (H200): the Cloud Billing Catalog API figures of 2026-10-13 for us-central1,
  as compiled per GPU in ``ULTRA_SOURCE`` (10.4365 on demand, 6.2607 Spot per GPU-hour, 8 GPUs).
* a4-highgpu-8g (B200): the on-demand list price 148.21 per hour for us-central1, as quoted
  in 2026 beside the same source's a3-highgpu-8g figure of 88.49 (which this table's own
  source confirms); no Spot figure found.
* a3-edgegpu-8g (H100, a few regions): no listed figure found with a source, so the table has
  none: a pool of it that keeps nodes needs a price file under the policies that weigh costs.

A machine type without a figure is refused only where a price is needed: the teardown
policies auto and shrink price the cluster; delete and keep do not.
"""

TABLE_DATE = "2025-03-06"
RETRIEVED = "2026-12"
REGION = "us-central1"
SAME_PRICE_REGIONS = frozenset({"us-central1", "us-east1", "us-west1"})
SOURCES = (
    "https://cloud.google.com/compute/vm-instance-pricing",
    "https://cloud.google.com/compute/gpus-pricing",
    "https://cloud.google.com/spot-vms/pricing",
)
ULTRA_SOURCE = (
    "https://huggingface.co/datasets/tanod/cloud-gpu-list-prices (snapshot 2026-10-13 of the "
    "Google Cloud Billing Catalog API, per GPU-hour)"
)
COMPILATION = (
    "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator (pricing.yml, generated "
    "2025-03-06 from the Cloud Billing Catalog API)"
)

ON_DEMAND, SPOT, FLEX_START, RESERVATION = "ON_DEMAND", "SPOT", "FLEX_START", "RESERVATION"
MODELS = (ON_DEMAND, SPOT, FLEX_START, RESERVATION)
# Other spellings accepted in price files, and the model each one means.
MODEL_ALIASES = {"STANDARD": ON_DEMAND}
# The marginal price of a RESERVATION node: the reservation is paid anyway.
RESERVATION_PRICE = 0.0

# Machine type -> provisioning model -> USD per node-hour (us-central1; see the module docstring).
HOURLY_USD: dict[str, dict[str, float]] = {
    # Login nodes: N2, 4 GiB per vCPU.
    "n2-standard-2": {ON_DEMAND: 0.097118, SPOT: 0.029976},
    "n2-standard-4": {ON_DEMAND: 0.194236, SPOT: 0.059952},
    "n2-standard-8": {ON_DEMAND: 0.388472, SPOT: 0.119904},
    "n2-standard-16": {ON_DEMAND: 0.776944, SPOT: 0.239808},
    "n2-standard-32": {ON_DEMAND: 1.553888, SPOT: 0.479616},
    # G2: NVIDIA L4 24GB.
    "g2-standard-4": {ON_DEMAND: 0.706832, SPOT: 0.279932},
    "g2-standard-8": {ON_DEMAND: 0.853624, SPOT: 0.336764},
    "g2-standard-12": {ON_DEMAND: 1.000416, SPOT: 0.393596},
    "g2-standard-16": {ON_DEMAND: 1.147208, SPOT: 0.450428},
    "g2-standard-24": {ON_DEMAND: 2.000833, SPOT: 0.787192},
    "g2-standard-32": {ON_DEMAND: 1.734376, SPOT: 0.677756},
    "g2-standard-48": {ON_DEMAND: 4.001665, SPOT: 1.574384},
    "g2-standard-96": {ON_DEMAND: 8.00333, SPOT: 3.148768},
    # A2: NVIDIA A100 40GB (highgpu) and 80GB (ultragpu).
    "a2-highgpu-1g": {ON_DEMAND: 3.673385, SPOT: 1.293355},
    "a2-highgpu-2g": {ON_DEMAND: 7.34677, SPOT: 2.58671},
    "a2-highgpu-4g": {ON_DEMAND: 14.69354, SPOT: 5.17342},
    "a2-highgpu-8g": {ON_DEMAND: 29.38708, SPOT: 10.34684},
    "a2-ultragpu-1g": {ON_DEMAND: 5.068798, SPOT: 2.027468},
    "a2-ultragpu-2g": {ON_DEMAND: 10.137596, SPOT: 4.054937},
    "a2-ultragpu-4g": {ON_DEMAND: 20.275191, SPOT: 8.109874},
    "a2-ultragpu-8g": {ON_DEMAND: 40.550383, SPOT: 16.219747},
    "a2-megagpu-16g": {ON_DEMAND: 55.739504},
    # A3: NVIDIA H100 80GB (High, Mega, Edge), H200 (Ultra); A4: NVIDIA B200.
    "a3-highgpu-8g": {ON_DEMAND: 88.49, SPOT: 35.39575},
    "a3-megagpu-8g": {ON_DEMAND: 92.937588, SPOT: 37.391837},
    "a3-edgegpu-8g": {},
    "a3-ultragpu-8g": {ON_DEMAND: 83.492, SPOT: 50.0856},
    "a4-highgpu-8g": {ON_DEMAND: 148.21},
}

# Why a machine type's figures differ from the rest of the table (shown with its price).
NOTES = {
    "a3-megagpu-8g": "us-east4 figures: the machine is not offered in us-central1",
    "a2-megagpu-16g": "derived from the A2 rates; no Spot figure",
    "a3-edgegpu-8g": "no listed figure found with a source",
    "a3-ultragpu-8g": "Billing Catalog API figures of 2026-10-13 (ULTRA_SOURCE)",
    "a4-highgpu-8g": "on-demand list price quoted in 2026; no Spot figure",
}
# Why the table has no figure for a provisioning model, when it has none for any machine.
MODEL_NOTES = {
    FLEX_START: "the table records no FLEX_START (DWS flex-start) prices",
}


def table_source() -> str:
    """One line naming the table, its date and its sources, for results and reports."""
    pages = ", ".join(url.removeprefix("https://") for url in SOURCES)
    return (
        f"price table: {REGION} prices as listed on {TABLE_DATE}, retrieved {RETRIEVED} ({pages})"
    )

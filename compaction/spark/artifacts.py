"""The official jars Spark needs, pinned: which Iceberg runtime goes with which Spark line, where they come from
(Maven Central, through ``mvn dependency:copy``, so the machine's Maven settings - mirrors, proxies - apply) and their
SHA-256 digests, checked before a jar is put into the cache.

A Spark line is chosen by the PySpark installed beside this package (``pyspark==4.1.*`` -> line ``4.1``); each line
has a default Iceberg release (the newest that builds a runtime for it) and may have older pinned ones, selected with
``ICECOMPACT_ICEBERG_VERSION`` (the oldest release we claim, 1.10.2, is tested that way). Nothing is repaired or
extracted from another project's package: what is cached is byte for byte what Maven Central publishes.

``python -m compaction.spark.artifacts fetch`` (run by ``make install``) fills the cache for the installed line;
``... print`` lists the jars a session would use.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable

from compaction import settings
from compaction.core.errors import ConfigError

ICEBERG_VERSION_ENV = "ICECOMPACT_ICEBERG_VERSION"
#: The dependency plugin is pinned too: ``mvn dependency:copy`` alone resolves whichever version Maven prefers.
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


@dataclass(frozen=True)
class MavenJar:
    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def url(self) -> str:
        return (f"https://repo1.maven.org/maven2/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/"
                f"{self.file_name}")


@dataclass(frozen=True)
class IcebergRelease:
    """The Iceberg Spark runtime of one release for one Spark line, and the AWS bundle that goes with it (the runtime
    carries ``S3FileIO`` but no AWS SDK; the bundle is only the SDK, so a bundle of a neighbouring release serves
    when a release published none)."""

    version: str
    runtime: MavenJar
    aws_bundle: MavenJar


@dataclass(frozen=True)
class SparkLine:
    name: str
    scala: str
    pyspark: str  # the PyPI release tested on this line
    releases: tuple[IcebergRelease, ...]  # newest (the line's default) first

    @property
    def default_release(self) -> IcebergRelease:
        return self.releases[0]

    def release(self, version: str | None) -> IcebergRelease:
        if not version:
            return self.default_release
        for release in self.releases:
            if release.version == version:
                return release
        known = ", ".join(r.version for r in self.releases)
        raise ConfigError(f"Iceberg {version} is not pinned for Spark {self.name} (pinned: {known}); "
                          f"unset {ICEBERG_VERSION_ENV} or choose one of these")


def _iceberg(group_artifact: str, version: str, sha256: str) -> MavenJar:
    return MavenJar("org.apache.iceberg", group_artifact, version, sha256)


_AWS_BUNDLE_1_12_0 = _iceberg("iceberg-aws-bundle", "1.12.0",
                              "dd7e49ffa4ac9b215bed846581991259e3aec9bb2fa08d6cec029c46cd66d957")
_AWS_BUNDLE_1_10_1 = _iceberg("iceberg-aws-bundle", "1.10.1",  # no 1.10.2 bundle was published
                              "86bf20892ea5b4c17688f19b075399885f6aa5303f6b2dc9f491e76ceef9633b")

SPARK_LINES: dict[str, SparkLine] = {
    "4.1": SparkLine("4.1", "2.13", "4.1.4", (
        IcebergRelease("1.12.0", _iceberg("iceberg-spark-runtime-4.1_2.13", "1.12.0",
                                          "3123c3798af642dd537230923548e013ef41cc28b6626e5225808cf5670a0f82"),
                       _AWS_BUNDLE_1_12_0),
    )),
    "3.5": SparkLine("3.5", "2.12", "3.5.9", (
        IcebergRelease("1.12.0", _iceberg("iceberg-spark-runtime-3.5_2.12", "1.12.0",
                                          "8dd8c90e54ed1a20f2461309d047a255ee56382eb7c0a46162b27a4936fd86dc"),
                       _AWS_BUNDLE_1_12_0),
        IcebergRelease("1.10.2", _iceberg("iceberg-spark-runtime-3.5_2.12", "1.10.2",
                                          "c562d482dcd16b666e808b755469fbc4b2604284b41622c9d87e2c02b7cc6c5f"),
                       _AWS_BUNDLE_1_10_1),
    )),
}
SPARK_LINE_DEFAULT = "4.1"
#: The oldest Iceberg release the code may rely on: nothing newer than this is assumed.
ICEBERG_OLDEST_SUPPORTED = "1.10.2"

#: JDBC drivers for the SQL catalogs (Spark's JdbcCatalog and the DriverManager on the driver's class path).
JDBC_DRIVERS: tuple[MavenJar, ...] = (
    MavenJar("org.xerial", "sqlite-jdbc", "3.54.1.0", "f8dce420a6016278497f4f0560f65602b9db858de141b541cf91a4644ebe4639"),
    MavenJar("org.postgresql", "postgresql", "42.7.14", "73914527305a40cce504b0d3d90b23caf565136912d607ae8ae7c5895512332c"),
)


def installed_pyspark_version() -> str:
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError as e:
        raise ConfigError("pyspark is not installed: run `make install`") from e


def spark_line(pyspark_version: str | None = None) -> SparkLine:
    """The supported line of ``pyspark_version`` (default: the installed PySpark)."""
    version = pyspark_version or installed_pyspark_version()
    name = ".".join(version.split(".")[:2])
    try:
        return SPARK_LINES[name]
    except KeyError:
        supported = ", ".join(sorted(SPARK_LINES))
        raise ConfigError(f"Spark {version} is not a supported line (supported: {supported}); install one of "
                          f"them, e.g. pip install 'pyspark=={SPARK_LINES[SPARK_LINE_DEFAULT].pyspark}'") from None


def iceberg_release(line: SparkLine | None = None) -> IcebergRelease:
    line = line or spark_line()
    return line.release(os.environ.get(ICEBERG_VERSION_ENV, "").strip() or None)


def jars_for(release: IcebergRelease, *, aws_bundle: bool = True) -> tuple[MavenJar, ...]:
    return (release.runtime, *((release.aws_bundle,) if aws_bundle else ()), *JDBC_DRIVERS)


def jar_cache_dir() -> Path:
    path = settings.cache_dir() / "maven"
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cached_path(jar: MavenJar, cache: Path | None = None) -> Path:
    """Where ``jar`` lives once fetched; :class:`ConfigError` when it has not been fetched."""
    path = (cache or jar_cache_dir()) / jar.file_name
    if not path.is_file():
        raise ConfigError(f"{jar.coordinate} is not in {path.parent}: run `make install` "
                          f"(or `python -m compaction.spark.artifacts fetch`)")
    return path


def verified_copy(source: Path, jar: MavenJar, cache: Path) -> Path:
    """Move ``source`` into the cache as ``jar`` if its digest is the pinned one; refuse it otherwise."""
    actual = sha256_of(source)
    if actual != jar.sha256:
        raise ConfigError(f"{jar.coordinate}: SHA-256 {actual} does not match the pinned {jar.sha256}; "
                          f"nothing was cached (a mirror serving another file?)")
    target = cache / jar.file_name
    partial = target.with_suffix(".jar.partial")
    shutil.copyfile(source, partial)
    partial.replace(target)
    return target


def maven_copy_command(jar: MavenJar, output_dir: Path) -> list[str]:
    """The ``mvn`` command that copies ``jar`` from the configured repositories (Maven Central unless the machine's
    settings name a mirror) into ``output_dir``."""
    return ["mvn", "-B", "-q", f"{MAVEN_DEPENDENCY_PLUGIN}:copy", f"-Dartifact={jar.coordinate}",
            f"-DoutputDirectory={output_dir}", "-Dmdep.overWriteReleases=true"]


def fetch(jars: tuple[MavenJar, ...], cache: Path | None = None, *,
          log: Callable[[str], None] = print) -> list[Path]:
    """Fetch every jar not yet cached (idempotent); each one checked against its pinned digest."""
    cache = cache or jar_cache_dir()
    missing = [j for j in jars if not ((cache / j.file_name).is_file() and sha256_of(cache / j.file_name) == j.sha256)]
    if missing and shutil.which("mvn") is None:
        raise ConfigError("mvn not found: install Maven (apt-get install maven) to fetch "
                          + ", ".join(j.coordinate for j in missing))
    for jar in missing:
        log(f">> mvn dependency:copy {jar.coordinate}")
        with tempfile.TemporaryDirectory(prefix="icecompact-mvn-") as tmp:
            result = subprocess.run(maven_copy_command(jar, Path(tmp)), capture_output=True, text=True)
            fetched = Path(tmp) / jar.file_name
            if result.returncode != 0 or not fetched.is_file():
                tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
                raise ConfigError(f"mvn could not fetch {jar.coordinate} (exit {result.returncode}):\n{tail}")
            verified_copy(fetched, jar, cache)
    return [cache / j.file_name for j in jars]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compaction.spark.artifacts",
                                     description="Fetch or list the pinned official jars of the installed Spark line.")
    parser.add_argument("command", choices=("fetch", "print"))
    parser.add_argument("--all", action="store_true", help="every pinned release of the line, not only the selected")
    args = parser.parse_args(argv)
    try:
        line = spark_line()
        releases = line.releases if args.all else (iceberg_release(line),)
        jars: list[MavenJar] = []
        for release in releases:
            jars.extend(j for j in jars_for(release) if j not in jars)
        if args.command == "fetch":
            paths = fetch(tuple(jars))
        else:
            paths = [cached_path(j) for j in jars]
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"Spark {line.name} (pyspark {installed_pyspark_version()}, Scala {line.scala}), "
          f"Iceberg {', '.join(r.version for r in releases)}")
    for path in paths:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

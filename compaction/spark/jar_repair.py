"""Build the companion jar that repairs the Iceberg Spark runtime shipped on PyPI.

The only Iceberg Spark runtime reachable here (``snowpark-connect-deps-iceberg`` ships the official
``iceberg-spark-runtime-3.5_2.12-1.10.x.jar``) lacks Iceberg's relocated Jackson
(``org/apache/iceberg/shaded/com/fasterxml/jackson/...``): the first metadata write fails with
``NoClassDefFoundError ... JsonFactoryBuilder``. The same jar carries a complete Jackson relocated under
``org/apache/iceberg/shaded/org/apache/parquet/shaded/com/fasterxml/jackson/``. We copy those classes to the
package Iceberg expects, rewriting every CONSTANT_Utf8 entry of each class file's constant pool (JVM spec
§4.4) that names the parquet-shaded package. Other bytes of the class file are untouched, so no
verification data (StackMapTable offsets, code) moves.

Stdlib only; runs in well under a second; idempotent (the output is keyed by the source jar's digest).
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

SOURCE_PREFIX = "org/apache/iceberg/shaded/org/apache/parquet/shaded/com/fasterxml/jackson/"
TARGET_PREFIX = "org/apache/iceberg/shaded/com/fasterxml/jackson/"
REPAIR_FORMAT = "1"

# Constant pool tag -> fixed payload size in bytes (JVM spec table 4.4-B); Utf8 (1) is variable-length.
_FIXED_TAG_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}


class JarRepairError(RuntimeError):
    pass


@dataclass(frozen=True)
class Relocation:
    """Move the classes and resources under ``source`` (an internal-name prefix ending in ``/``) to ``target``,
    rewriting every reference to them, in slash (``a/b/C``) and dotted (``a.b.C``) form."""

    source: str
    target: str

    def rewrite(self, data: bytes) -> bytes:
        src, dst = self.source.rstrip("/").encode(), self.target.rstrip("/").encode()
        return data.replace(src, dst).replace(src.replace(b"/", b"."), dst.replace(b"/", b"."))


JACKSON = (Relocation(SOURCE_PREFIX, TARGET_PREFIX),)


def _relocate_text(data: bytes, rules: Sequence[Relocation] = JACKSON) -> bytes:
    for rule in rules:
        data = rule.rewrite(data)
    return data


def relocate_class(data: bytes, rules: Sequence[Relocation] = JACKSON) -> bytes:
    """Return the class file with every Utf8 constant naming a source package rewritten."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise JarRepairError("not a class file")
    (count,) = struct.unpack_from(">H", data, 8)
    out = bytearray(data[:10])
    pos = 10
    index = 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            text = _relocate_text(data[pos + 3 : pos + 3 + length], rules)
            if len(text) > 0xFFFF:
                raise JarRepairError("constant too long after relocation")
            out += bytes([1]) + struct.pack(">H", len(text)) + text
            pos += 3 + length
            index += 1
        elif tag in _FIXED_TAG_SIZES:
            size = _FIXED_TAG_SIZES[tag]
            out += data[pos : pos + 1 + size]
            pos += 1 + size
            # Long and Double occupy two constant pool slots (JVM spec §4.4.5).
            index += 2 if tag in (5, 6) else 1
        else:
            raise JarRepairError(f"unknown constant pool tag {tag} at offset {pos}")
    out += data[pos:]
    return bytes(out)


def relocate_jar(
    source_jar: Path,
    output_jar: Path,
    rules: Sequence[Relocation],
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
) -> int:
    """Write ``output_jar`` with the entries of ``source_jar`` under a rule's source moved to its target, plus the
    entries under a ``keep`` prefix as they are (dependencies the moved classes reference), minus those under a
    ``drop`` prefix. Every class and text resource written is rewritten by all rules. Returns the entries moved."""
    moved = 0
    tmp = output_jar.with_suffix(".tmp")
    output_jar.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(source_jar) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        dst.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: icecompact jar_repair\n\n")
        for info in src.infolist():
            name = info.filename
            if name.endswith("/") or any(name.startswith(d) for d in drop):
                continue
            rule = next((r for r in rules if name.startswith(r.source)), None)
            if rule is not None:
                new_name = rule.target + name[len(rule.source) :]
                moved += 1
            elif any(name.startswith(k) for k in keep):
                new_name = name
            elif name.startswith("META-INF/services/") and _relocate_text(name.encode(), rules) != name.encode():
                new_name = _relocate_text(name.encode(), rules).decode()
            else:
                continue
            data = src.read(info)
            data = relocate_class(data, rules) if name.endswith(".class") else _relocate_text(data, rules)
            dst.writestr(new_name, data)
    if moved == 0:
        tmp.unlink(missing_ok=True)
        raise JarRepairError(f"{source_jar} has no entries under {[r.source for r in rules]}; cannot relocate")
    os.replace(tmp, output_jar)
    return moved


def needs_repair(runtime_jar: Path) -> bool:
    with zipfile.ZipFile(runtime_jar) as zf:
        names = set(zf.namelist())
    return TARGET_PREFIX + "core/JsonFactoryBuilder.class" not in names


def build_companion_jar(runtime_jar: Path, output_jar: Path) -> int:
    """Write the companion jar with the relocated Jackson classes; return the number of classes written."""
    return relocate_jar(runtime_jar, output_jar, JACKSON)


def find_runtime_jar() -> Path:
    """Locate the Iceberg Spark 3.5 / Scala 2.12 runtime jar installed by ``snowpark-connect-deps-iceberg``."""
    try:
        import snowpark_connect_deps_iceberg as pkg  # type: ignore[import-not-found]
    except ImportError as e:
        raise JarRepairError(
            "Iceberg Spark runtime not installed: run `make install` (pip pulls snowpark-connect-deps-iceberg), "
            "or set ICECOMPACT_SPARK_PACKAGES to fetch Iceberg from Maven"
        ) from e
    candidates = sorted(
        jar for root in pkg.__path__ for jar in Path(root).glob("jars/iceberg-spark-runtime-3.5_2.12-*.jar")
    )
    if not candidates:
        raise JarRepairError(f"no iceberg-spark-runtime-3.5_2.12 jar under {list(pkg.__path__)}")
    return candidates[-1]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def ensure_companion_jar(cache_dir: Path, runtime_jar: Path | None = None) -> Path | None:
    """Build (once) and return the companion jar path; ``None`` when the runtime jar needs no repair."""
    runtime_jar = runtime_jar or find_runtime_jar()
    if not needs_repair(runtime_jar):
        return None
    out = cache_dir / f"iceberg-jackson-companion-{_digest(runtime_jar)}-r{REPAIR_FORMAT}.jar"
    if not out.exists():
        build_companion_jar(runtime_jar, out)
    return out


def main(argv: list[str] | None = None) -> int:
    from compaction.settings import cache_dir
    from compaction.spark.object_store_jars import ensure_object_store_jars

    target = ensure_companion_jar(cache_dir())
    runtime = find_runtime_jar()
    print(f"iceberg runtime: {runtime}")
    print(f"companion jar:   {target or '(not needed)'}")
    for jar in ensure_object_store_jars(cache_dir()):
        print(f"object store:    {jar}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""docs/DEPLOY.md's environment file is read by systemd (EnvironmentFile=) and by the shell
(`set -a; . file`): its example, written by its rule (a value with anything but letters, digits
and -_.,:/@+=% in single quotes), reads the same in the shell as systemd reads it (a single-quoted
value: what is between the quotes, taken as it is; an unquoted one: as it is). "No quotes needed"
read a value with a space, `$` or `#` apart."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAIN = re.compile(r"[A-Za-z0-9\-_.,:/@+=%]*")


def example() -> list[str]:
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    block = re.search(r"```sh\n(# /etc/biasstudy\.env.*?)```", text, re.S)
    assert block, "DEPLOY.md's example environment file"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def systemd_reading(line: str) -> tuple[str, str]:
    key, value = line.split("=", 1)
    if value.startswith("'"):
        assert value.endswith("'") and value.count("'") == 2, line
        return key, value[1:-1]
    assert PLAIN.fullmatch(value), f"{line}: needs single quotes by the rule"
    return key, value


def test_the_example_environment_file_reads_the_same_in_the_shell_as_in_systemd(tmp_path):
    lines = example()
    expected = dict(systemd_reading(line) for line in lines)
    assert any("$" in value for value in expected.values()) and any(" " in value for value in expected.values())
    path = tmp_path / "biasstudy.env"
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        ["bash", "-c", 'set -a; . "$1"; set +a; env -0', "bash", str(path)],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    shell = dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)
    assert {key: shell.get(key) for key in expected} == expected

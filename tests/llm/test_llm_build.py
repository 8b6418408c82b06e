"""The installed llama.cpp runs on any x86-64 host (issue 55): ``tools/build-llama.sh`` built
it without AMX tile instructions (a VM may advertise AMX and even grant the tile permission,
yet fault on the first ``ldtilecfg``) and without AVX-512 (not on every host), whatever CPU
the build ran on; the venv holds the wheel of exactly the script's flags (a wheel built
natively before is replaced, never reused)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
AMX = re.compile(r"\b(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilerelease|tilezero|tdpb[su][su]d|tdpbf16ps|tdpfp16ps)\b")
AVX512 = re.compile(r"%zmm\d|%k[1-7]\b")  # 512-bit registers, or AVX-512's mask registers (EVEX on xmm/ymm too)


@pytest.fixture(scope="module")
def llama_libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None:
        pytest.skip("llama-cpp-python is not installed: make install builds it (tools/build-llama.sh)")
    found = sorted({path.resolve() for path in (Path(spec.origin).parent / "lib").glob("lib*.so*")})
    assert any("libggml-cpu" in path.name for path in found), found
    return found


def _instructions(library: Path) -> str:
    return subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True,
                          check=True).stdout


def test_no_installed_llama_cpp_library_holds_an_amx_or_avx512_instruction(llama_libraries):
    for library in llama_libraries:
        code = _instructions(library)
        assert len(code) > 10_000, f"objdump read nothing of {library}"
        assert not AMX.findall(code), f"{library.name} holds AMX tile instructions"
        assert not AVX512.findall(code), f"{library.name} holds AVX-512 instructions"


def test_the_checks_see_an_amx_and_an_avx512_instruction(tmp_path):
    source = tmp_path / "probe.c"
    source.write_text('void probe(void *config) { __asm__ volatile("ldtilecfg (%0)\\n\\tvaddps %%zmm1, %%zmm2, %%zmm3"'
                      ' :: "r"(config)); }\n')
    subprocess.run(["cc", "-c", "-o", str(tmp_path / "probe.o"), str(source)], check=True)
    code = _instructions(tmp_path / "probe.o")
    assert AMX.findall(code) == ["ldtilecfg"] and AVX512.findall(code)


def test_the_venv_holds_the_wheel_of_the_build_scripts_flags(llama_libraries):
    script = ROOT / "tools" / "build-llama.sh"
    key = subprocess.run(["bash", str(script), sys.executable, "--print-key"], capture_output=True, text=True,
                         check=True).stdout.strip()
    record = Path(sys.prefix) / "share" / "pathweave" / "llama-cpp-build.txt"
    lines = record.read_text().splitlines()
    assert lines[0] == key and "-DGGML_NATIVE=OFF" in lines[1] and "-DGGML_AMX_INT8=OFF" in lines[1]
    other = subprocess.run(["bash", str(script), sys.executable, "--flags", "-DGGML_NATIVE=ON", "--print-key"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert other != key  # other flags, another wheel: the cache is keyed on them


def test_a_cpu_without_avx2_is_refused_with_what_it_lacks(tmp_path):
    from pathweave.servers.llm_server import missing_cpu_features

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 ssse3 sse4_1 sse4_2 popcnt avx f16c\n")
    assert missing_cpu_features(cpuinfo) == ["avx2", "fma", "bmi2"]
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c bmi2 amx_tile\n")
    assert missing_cpu_features(cpuinfo) == []
    assert missing_cpu_features(tmp_path / "absent") == []  # not Linux on x86-64: nothing to say

#!/usr/bin/env python3
"""Checks of fpga-bitstream/ that need no Vivado and no card, against the facts in shared/facts/.

Run by sim/run.sh (which installs openocd and tclsh first). Prints one "PASS name" or "FAIL name: why" line
per check. Checks:
  * shell scripts parse (bash -n);
  * build.sh without Vivado fails early and clearly;
  * build.sh + build.tcl run end to end under a Vivado stand-in (sim/fake-bin/vivado, sim/vivado_stub.tcl),
    and every IP setting, pin, configuration and MultiBoot property, synth generic and write_cfgmem layout it
    makes is compared with the facts; the manifest it writes is validated (schema, hashes);
  * a timing failure stops the build;
  * the OpenOCD configuration parses in a real OpenOCD and its procedures issue the expected commands;
  * the programming scripts accept and refuse the right images and run the right OpenOCD commands (with an
    OpenOCD stand-in).
Usage: check_static.py OUTDIR
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SIM = Path(__file__).resolve().parent
FPGA = SIM.parent
REPO = FPGA.parent
OUT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else FPGA / "build" / "sim"

results = {"pass": 0, "fail": 0}


def check(name, ok, why=""):
    if ok:
        results["pass"] += 1
        print(f"PASS {name}")
    else:
        results["fail"] += 1
        print(f"FAIL {name}: {why}")
    return ok


def expect_equal(name, have, want):
    """One check over a whole mapping: lists every key whose value differs."""
    bad = [f"{k}: have {have.get(k)!r}, want {v!r}" for k, v in want.items() if str(have.get(k)).lower() != str(v).lower()]
    return check(name, not bad, "; ".join(bad))


def run(cmd, env=None, cwd=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(cmd, env=full_env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


# ---- facts ---------------------------------------------------------------------------------------------
# shared/facts/reference-driver.md §7.2 (IP), xdma.md §1 (identity), picoevb-board.md §1.1 / reference §7.4.
FACTS_IP = {
    "xdma_0": {
        "CONFIG.mode_selection": "Basic",
        "CONFIG.pl_link_cap_max_link_speed": "5.0_GT/s",  # Gen2
        "CONFIG.pl_link_cap_max_link_width": "X1",
        "CONFIG.axisten_freq": "125",
        "CONFIG.axi_data_width": "64_bit",
        "CONFIG.axi_addr_width": "64",
        "CONFIG.axi_id_width": "2",
        "CONFIG.xdma_axi_intf_mm": "AXI_Memory_Mapped",
        "CONFIG.axilite_master_en": "true",
        "CONFIG.axilite_master_size": "4",
        "CONFIG.axilite_master_scale": "Kilobytes",
        "CONFIG.xdma_axilite_slave": "false",
        "CONFIG.cfg_mgmt_if": "false",
        "CONFIG.plltype": "QPLL1",
        "CONFIG.xdma_rnum_chnl": "1",
        "CONFIG.xdma_wnum_chnl": "1",
        "CONFIG.xdma_size": "64",
        "CONFIG.xdma_scale": "Kilobytes",
        "CONFIG.vendor_id": "10DE",
        "CONFIG.pf0_device_id": "0001",
        "CONFIG.pf0_subsystem_vendor_id": "10DE",
        "CONFIG.pf0_subsystem_id": "0001",
        "CONFIG.pf0_class_code": "058000",
        "CONFIG.pf0_interrupt_pin": "INTA",
        "CONFIG.pf0_msi_enabled": "true",
        "CONFIG.pf0_msi_cap_multimsgcap": "1_vector",
        "CONFIG.xdma_num_usr_irq": "1",
    },
    "axi_bram_ctrl_0": {
        "CONFIG.DATA_WIDTH": "64",
        "CONFIG.MEM_DEPTH": "8192",
        "CONFIG.SINGLE_PORT_BRAM": "1",
        "CONFIG.ECC_TYPE": "0",
        "CONFIG.READ_LATENCY": "1",
        "CONFIG.SUPPORTS_NARROW_BURST": "0",
    },
    "blk_mem_gen_0": {
        "CONFIG.Write_Width_A": "64",
        "CONFIG.Read_Width_A": "64",
        "CONFIG.Write_Depth_A": "8192",
        "CONFIG.Use_Byte_Write_Enable": "true",
        "CONFIG.Memory_Type": "Single_Port_RAM",
    },
    "axi_gpio_0": {
        "CONFIG.C_IS_DUAL": "1",
        "CONFIG.C_GPIO_WIDTH": "3",
        "CONFIG.C_ALL_OUTPUTS": "1",
        "CONFIG.C_GPIO2_WIDTH": "4",
        "CONFIG.C_ALL_INPUTS_2": "0",
        "CONFIG.C_TRI_DEFAULT_2": "0x0000000F",
        "CONFIG.C_INTERRUPT_PRESENT": "1",
    },
}
FACTS_PINS = {
    "perst_n": "A10", "clkreq_n": "A9", "refclk_p": "B6",
    "per0_p": "G4", "per0_n": "G3", "pet0_p": "B2", "pet0_n": "B1",
    "leds[0]": "V12", "leds[1]": "V13", "leds[2]": "V14",
    "iocon[0]": "A14", "iocon[1]": "A13", "iocon[2]": "B12", "iocon[3]": "A12",
}
FACTS_CONFIG = {
    "CONFIG_MODE": "SPIx4",
    "BITSTREAM.CONFIG.SPI_BUSWIDTH": "4",
    "BITSTREAM.CONFIG.CONFIGRATE": "66",
    "BITSTREAM.CONFIG.SPI_FALL_EDGE": "YES",
    "BITSTREAM.GENERAL.COMPRESS": "TRUE",
    "CONFIG_VOLTAGE": "3.3",
    "CFGBVS": "VCCO",
}
FACTS_PART = "xc7a50tcsg325-2"
FACTS_PCI = {"vendor": "10de", "device": "0001", "subsystem_vendor": "10de", "subsystem": "0001", "class": "058000"}
FACTS_FLASH_BYTES = 4 * 1024 * 1024  # S25FL132K
FACTS_LARGEST_COMPRESSED_IMAGE = 1_311_004  # NVIDIA picoevb, picoevb-board.md §1.3


def read_layout():
    layout = {}
    for line in (FPGA / "flash-layout.conf").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            layout[k] = v
    return layout


def header_defines():
    defs = {}
    for m in re.finditer(r"^`define (\w+)[ \t]+(\S+)", (FPGA / "rtl" / "gdr_id_regs.vh").read_text(), re.M):
        v = m.group(2)
        if "'h" in v:
            v = int(v.split("'h")[1].replace("_", ""), 16)
        elif v.isdigit():
            v = int(v)
        defs[m.group(1)] = v
    return defs


def git_head():
    """The commit build.sh will record (all zeros outside a git checkout, as build.sh does)."""
    if shutil.which("git") is None:
        return "0" * 40
    rc, out = run(["git", "-C", str(FPGA), "rev-parse", "HEAD"])
    return out.strip() if rc == 0 else "0" * 40


# ---- shell syntax --------------------------------------------------------------------------------------
def check_shell_syntax():
    scripts = sorted(FPGA.glob("*.sh")) + sorted((FPGA / "program").glob("*.sh")) + sorted(SIM.glob("*.sh"))
    scripts.append(SIM / "fake-bin" / "vivado")
    for s in scripts:
        rc, out = run(["bash", "-n", str(s)])
        check(f"bash -n {s.relative_to(FPGA)}", rc == 0, out.strip())


# ---- build.sh without Vivado ---------------------------------------------------------------------------
def check_no_vivado():
    empty = OUT / "empty-path"
    empty.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["/bin/bash", str(FPGA / "build.sh"), "--out", str(OUT / "never")],
                       env={"PATH": str(empty)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check("build.sh without vivado exits non-zero", p.returncode == 2, f"exit {p.returncode}")
    check("build.sh without vivado says so", "'vivado' was not found on PATH" in p.stderr
          and "settings64.sh" in p.stderr, p.stderr.strip()[:200])
    check("build.sh without vivado creates nothing", not (OUT / "never").exists(), "output dir was created")


# ---- the build under the Vivado stand-in ---------------------------------------------------------------
SOURCE_DATE_EPOCH = "1700000000"


def fake_build(tag, extra_env=None):
    out, work, log = OUT / tag / "out", OUT / tag / "work", OUT / tag / "vivado.log"
    shutil.rmtree(OUT / tag, ignore_errors=True)
    (OUT / tag).mkdir(parents=True)
    env = {"PATH": f"{SIM / 'fake-bin'}:{os.environ['PATH']}", "GDR_FAKE_VIVADO_LOG": str(log),
           "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    env.update(extra_env or {})
    rc, text = run([str(FPGA / "build.sh"), "--out", str(out), "--work", str(work)], env=env)
    entries = [line.split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    return rc, text, out, entries


def check_build():
    rc, text, out, log = fake_build("dry-build")
    if not check("build.sh runs end to end under the Vivado stand-in", rc == 0, text[-800:]):
        return None
    layout = read_layout()
    defs = header_defines()
    head = git_head()

    # IP
    ips = {e[1]: e[2] for e in log if e[0] == "IP"}
    check("IP cores are the reference's four", sorted(ips) == sorted(FACTS_IP),
          f"have {sorted(ips)}")
    props = {}
    for e in log:
        if e[0] == "IPPROP":
            props.setdefault(e[1], {})[e[2]] = e[3]
    for ip, want in FACTS_IP.items():
        expect_equal(f"{ip} settings match the reference design", props.get(ip, {}), want)

    # cross-file consistency
    top = (FPGA / "rtl" / "gdr_top.v").read_text()
    m = re.search(r"localparam integer AXI_ID_WIDTH = (\d+);", top)
    check("AXI ID width agrees: gdr_top.v, XDMA, BRAM controller",
          m and m.group(1) == props["xdma_0"].get("CONFIG.axi_id_width") ==
          props["axi_bram_ctrl_0"].get("CONFIG.ID_WIDTH"), f"top {m and m.group(1)}")
    bram_bytes = int(props["axi_bram_ctrl_0"]["CONFIG.MEM_DEPTH"]) * int(props["axi_bram_ctrl_0"]["CONFIG.DATA_WIDTH"]) // 8
    check("BRAM size equals the ID block's RAM_SIZE (pci::FPGA_RAM_SIZE)", bram_bytes == defs["GDR_ID_RAM_SIZE"],
          f"{bram_bytes} vs {defs['GDR_ID_RAM_SIZE']}")
    check("BRAM depth: blk_mem_gen and controller agree",
          props["blk_mem_gen_0"]["CONFIG.Write_Depth_A"] == props["axi_bram_ctrl_0"]["CONFIG.MEM_DEPTH"])
    check("BAR0 size: XDMA AXI-Lite master equals pci::BAR_USER_SIZE",
          int(props["xdma_0"]["CONFIG.axilite_master_size"]) * 1024 == defs["GDR_BAR0_SIZE"])
    check("BAR1 size: XDMA register BAR equals pci::BAR_DMA_SIZE",
          int(props["xdma_0"]["CONFIG.xdma_size"]) * 1024 == defs["GDR_BAR1_SIZE"])
    xdma = props["xdma_0"]
    expect_equal("XDMA identity equals pci.rs (through the generated header)", {
        "vendor": int(xdma["CONFIG.vendor_id"], 16), "device": int(xdma["CONFIG.pf0_device_id"], 16),
        "subsystem_vendor": int(xdma["CONFIG.pf0_subsystem_vendor_id"], 16),
        "subsystem": int(xdma["CONFIG.pf0_subsystem_id"], 16), "class": int(xdma["CONFIG.pf0_class_code"], 16),
    }, {"vendor": defs["GDR_PCI_VENDOR_ID"], "device": defs["GDR_PCI_DEVICE_ID"],
        "subsystem_vendor": defs["GDR_PCI_SUBSYS_VENDOR_ID"], "subsystem": defs["GDR_PCI_SUBSYS_ID"],
        "class": defs["GDR_PCI_CLASS_CODE"]})
    check("gdr_top ports match the GPIO widths",
          "output wire [2:0] leds" in top and "inout  wire [3:0] iocon" in top)

    # XDC
    pins = {e[1]: e[3] for e in log if e[0] == "PORTPROP" and e[2] == "PACKAGE_PIN"}
    expect_equal("XDC pins match picoevb-board.md / picoevb.xdc facts", pins, FACTS_PINS)
    check("XDC places no other port", set(pins) == set(FACTS_PINS), f"extra {set(pins) - set(FACTS_PINS)}")
    port = {}
    for e in log:
        if e[0] == "PORTPROP":
            port.setdefault(e[1], {})[e[2]] = e[3]
    lvcmos = [p for p in FACTS_PINS if not p.startswith(("per0", "pet0", "refclk"))]
    check("XDC: every LVCMOS pin is LVCMOS33", all(port[p].get("IOSTANDARD") == "LVCMOS33" for p in lvcmos))
    check("XDC: LEDs pulled up, 8 mA (active-low)",
          all(port[f"leds[{i}]"].get("PULLUP") == "true" and port[f"leds[{i}]"].get("DRIVE") == "8" for i in range(3)))
    check("XDC: PERST# pulled down", port["perst_n"].get("PULLDOWN") == "true")
    clocks = [e for e in log if e[0] == "CLOCK"]
    check("XDC: 100 MHz reference clock on refclk_p",
          len(clocks) == 1 and float(clocks[0][2]) == 10.0 and clocks[0][3] == "port:refclk_p", str(clocks))
    xdcprops = {e[1]: e[2] for e in log if e[0] == "XDCPROP"}
    expect_equal("XDC configuration: quad SPI, 66 MHz, compressed (facts)", xdcprops, FACTS_CONFIG)

    # part, top, generics
    check("part is XC7A50T-2CSG325C", [e[1] for e in log if e[0] in ("PROJECT_PART", "SYNTH_PART")] == [FACTS_PART] * 2)
    check("top module is gdr_top", [e[1] for e in log if e[0] == "TOP"] == ["gdr_top"])
    gen = {e[1]: int(e[2], 16) for e in log if e[0] == "GENERIC"}
    major, minor, patch = (int(x) for x in (FPGA / "VERSION").read_text().strip().split("."))
    expect_equal("synth generics: DESIGN_VERSION from VERSION, BUILD_HASH from git, BUILD_TIME", gen, {
        "DESIGN_VERSION": major << 24 | minor << 16 | patch,
        "BUILD_HASH": int(head[:8], 16),
        "BUILD_TIME": int(SOURCE_DATE_EPOCH),
    })
    check("implementation steps all run",
          [e[1] for e in log if e[0] == "STEP"] == ["opt_design", "place_design", "phys_opt_design", "route_design"])

    # bitstream variants
    bits = {e[1]: dict(kv.split("=", 1) for kv in e[2].split(",")) for e in log if e[0] == "BITSTREAM"}
    version = ".".join(map(str, (major, minor, patch)))
    update, golden = bits.get(f"gdr-picoevb-{version}-update.bit"), bits.get(f"gdr-picoevb-{version}-golden.bit")
    if check("two bitstreams written: update and golden", update is not None and golden is not None, str(list(bits))):
        upd = int(layout["UPDATE_OFFSET"], 16)
        check("golden: IPROG to the update slot (NEXT_CONFIG_ADDR, REBOOT)",
              int(golden.get("BITSTREAM.CONFIG.NEXT_CONFIG_ADDR", "0"), 16) == upd
              and golden.get("BITSTREAM.CONFIG.NEXT_CONFIG_REBOOT") == "ENABLE", str(golden))
        check("golden: watchdog armed from flash-layout.conf",
              golden.get("BITSTREAM.CONFIG.TIMER_CFG") == layout["GOLDEN_TIMER_CFG"], str(golden))
        check("update: no IPROG, no watchdog (safe over JTAG, no loop)",
              update.get("BITSTREAM.CONFIG.NEXT_CONFIG_REBOOT") == "DISABLE"
              and "BITSTREAM.CONFIG.TIMER_CFG" not in update and "BITSTREAM.CONFIG.NEXT_CONFIG_ADDR" not in update,
              str(update))
        for name, b in (("update", update), ("golden", golden)):
            check(f"{name}: fallback on, compressed, USERID = BUILD_HASH",
                  b.get("BITSTREAM.CONFIG.CONFIGFALLBACK") == "ENABLE"
                  and b.get("BITSTREAM.GENERAL.COMPRESS") == "TRUE"
                  and int(b.get("BITSTREAM.CONFIG.USERID", "0"), 16) == int(head[:8], 16), str(b))

    # flash images
    cfg = {e[1]: e[2:] for e in log if e[0] == "CFGMEM"}
    flash_mb = str(int(layout["FLASH_SIZE"], 16) // 0x100000)
    n = f"gdr-picoevb-{version}"

    def loads(entry):
        words = entry[3].split()
        return [(int(words[i + 1], 16), Path(words[i + 2]).name) for i in range(0, len(words), 3)]
    want_layout = [(int(layout["GOLDEN_OFFSET"], 16), f"{n}-golden.bit"), (int(layout["UPDATE_OFFSET"], 16), f"{n}-update.bit")]
    ok = all(cfg.get(f) and cfg[f][1] == "SPIx4" and cfg[f][2] == flash_mb for f in cfg) and len(cfg) == 4
    check("write_cfgmem: SPIx4, 4 MB, four images", ok, str(cfg))
    check("flash .mcs/.bin: golden at GOLDEN_OFFSET, update at UPDATE_OFFSET",
          all(f in cfg and loads(cfg[f]) == want_layout for f in (f"{n}-flash.mcs", f"{n}-flash.bin")), str(cfg))
    check("slot images start at 0 of their slot",
          loads(cfg.get(f"{n}-update.bin", ["", "", "", "up 0 x"])) == [(0, f"{n}-update.bit")]
          and loads(cfg.get(f"{n}-golden.bin", ["", "", "", "up 0 x"])) == [(0, f"{n}-golden.bit")])

    check_manifest(out, version, head, layout, defs)
    return out


def check_manifest(out, version, head, layout, defs):
    path = out / "manifest.json"
    try:
        man = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        check("manifest.json is valid JSON", False, str(e))
        return
    check("manifest.json is valid JSON", True)
    schema = {"schema": int, "design": str, "version": str, "git_hash": str, "git_dirty": bool, "build_date": str,
              "tool": str, "tool_version": str, "part": str, "id_block": dict, "pci": dict, "flash": dict,
              "files": list}
    bad = [k for k, t in schema.items() if not isinstance(man.get(k), t)]
    check("manifest: every field present with its type", not bad, f"bad {bad}")
    if bad:
        return
    expect_equal("manifest: identity", man, {
        "schema": 1, "design": "gdr-picoevb", "version": version, "git_hash": head, "tool": "Vivado",
        "tool_version": "2018.3", "part": FACTS_PART, "build_date": "2023-11-14T22:13:20Z"})
    expect_equal("manifest: PCI identity is the reference's", man["pci"], FACTS_PCI)
    expect_equal("manifest: flash layout from flash-layout.conf", man["flash"], {
        "part": layout["FLASH_PART"], "size": layout["FLASH_SIZE"], "golden_offset": layout["GOLDEN_OFFSET"],
        "update_offset": layout["UPDATE_OFFSET"], "slot_size": layout["SLOT_SIZE"]})
    idb = {k: int(v, 16) for k, v in man["id_block"].items()}
    expect_equal("manifest: ID block values from the header", idb, {
        "bar0_offset": defs["GDR_ID_BASE"], "magic": defs["GDR_ID_MAGIC"], "layout": defs["GDR_ID_LAYOUT_VERSION"],
        "caps": defs["GDR_ID_CAPS_PICOEVB"], "ram_size": defs["GDR_ID_RAM_SIZE"],
        "build_hash": int(head[:8], 16), "build_time": int(SOURCE_DATE_EPOCH)})
    problems = []
    for f in man["files"]:
        p = out / f["name"]
        if not p.is_file():
            problems.append(f"{f['name']} missing")
            continue
        if hashlib.sha256(p.read_bytes()).hexdigest() != f["sha256"] or p.stat().st_size != f["size"]:
            problems.append(f"{f['name']} hash/size differ")
    listed = {f["name"] for f in man["files"]}
    on_disk = {p.name for p in out.glob("gdr-picoevb-*")}
    check("manifest: sha256 and size of every output", not problems and listed == on_disk,
          "; ".join(problems) + f" unlisted {on_disk - listed}")
    roles = {f["role"] for f in man["files"]}
    need = {"update-bit", "golden-bit", "update-bin", "golden-bin", "flash-mcs", "flash-bin"}
    check("manifest: all roles present", need <= roles, f"missing {need - roles}")


def check_build_failures():
    rc, text, out, _ = fake_build("timing-fail", {"GDR_FAKE_WNS": "-0.120"})
    check("a timing failure stops the build", rc != 0 and "timing not met" in text
          and not (out / "manifest.json").exists(), text[-300:])
    rc, text, out, _ = fake_build("other-vivado", {"GDR_FAKE_VIVADO_VERSION": "2023.2"})
    check("another Vivado version builds with a warning", rc == 0 and "WARNING: gdr: Vivado 2023.2" in text, text[-300:])


# ---- Tcl helpers ---------------------------------------------------------------------------------------
def check_tcl_lib():
    bad_layout = OUT / "bad-layout.conf"
    bad_layout.write_text("FLASH_PART=x\nFLASH_SIZE=0x400000\nGOLDEN_OFFSET=0\nUPDATE_OFFSET=0x100000\n"
                          "SLOT_SIZE=0x200000\nGOLDEN_TIMER_CFG=0x1\n")
    script = f"""
source {FPGA / 'scripts' / 'gdr_lib.tcl'}
puts [gdr_version_word 1.2.3]
puts [gdr_version_word 255.255.65535]
puts [gdr_version_word 0.08.09]
puts [catch {{gdr_version_word 1.2}}]
puts [catch {{gdr_version_word 1.256.0}}]
puts [catch {{gdr_read_layout {bad_layout}}} e]
puts $e
gdr_read_layout {FPGA / 'flash-layout.conf'}
"""
    p = subprocess.run(["tclsh"], input=script, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = p.stdout.splitlines()
    check("Tcl version word encoding (edge cases)", lines[:5] == ["0x01020003", "0xFFFFFFFF", "0x00080009", "1", "1"],
          str(lines))
    check("Tcl layout check rejects overlapping slots", len(lines) > 6 and lines[5] == "1" and "overlaps" in lines[6],
          str(lines))
    check("flash-layout.conf passes the layout check", p.returncode == 0, p.stdout[-200:])
    layout = read_layout()
    slot = int(layout["SLOT_SIZE"], 16)
    check("flash is the S25FL132K's 4 MiB", int(layout["FLASH_SIZE"], 16) == FACTS_FLASH_BYTES)
    check("a slot holds the largest known compressed image",
          slot >= FACTS_LARGEST_COMPRESSED_IMAGE, f"{slot} < {FACTS_LARGEST_COMPRESSED_IMAGE}")


# ---- OpenOCD -------------------------------------------------------------------------------------------
MOCKS = r"""
proc irscan {args} { echo "MOCK irscan $args" }
proc drscan {args} {
    echo "MOCK drscan $args"
    if {[llength $::mock_reads]} {
        set v [lindex $::mock_reads 0]
        set ::mock_reads [lrange $::mock_reads 1 end]
        return $v
    }
    return 00000000
}
proc runtest {args} {}
proc pld {args} { echo "MOCK pld $args"; if {[lindex $args 1] eq "0"} { error "no pld 0 in this version" } }
proc flash {args} { echo "MOCK flash $args" }
proc reset {args} { echo "MOCK reset $args" }
proc xc7_program {args} { echo "MOCK xc7_program $args" }
"""


def check_openocd_cfg():
    cfg = FPGA / "program" / "picoevb.cfg"
    procs = ["gdr_pld_load", "gdr_flash_init", "gdr_flash_write", "gdr_reload", "gdr_cfg_read", "gdr_usercode", "gdr_status"]
    rc, out = run(["openocd", "-c", "set GDR_JTAG_KHZ 1000", "-f", str(cfg), "-c", "echo PROCS:[info procs gdr_*]",
                   "-c", "ft232r jtag_nums", "-c", "shutdown"])
    m = re.search(r"PROCS:(.*)", out)
    check("picoevb.cfg parses in OpenOCD and defines the gdr_* procedures",
          rc == 0 and m and all(p in m.group(1).split() for p in procs), out[-500:])
    check("picoevb.cfg: FT230X 0403:6015, TCK/TMS/TDI/TDO = D0/D3/D1/D2",
          "TCK = 0 TXD, TMS = 3 CTS, TDI = 1 RXD, TDO = 2 RTS" in out, out[-500:])
    mocks = OUT / "openocd-mocks.tcl"
    mocks.write_text(MOCKS)
    proxy, image = OUT / "proxy.bit", OUT / "img.bin"
    proxy.write_bytes(b"proxy")
    image.write_bytes(b"image")
    # USERCODE, then STAT (two scans), WBSTAR (two), BOOTSTS: CFG_OUT returns bit-reversed 0x00000003.
    reads = "12345678 0 0 0 00000400 0 c0000000"
    rc, out = run(["openocd", "-c", "set GDR_JTAG_KHZ 1000", "-f", str(cfg), "-f", str(mocks),
                   "-c", f"set ::mock_reads [list {reads}]", "-c", "gdr_status",
                   "-c", f"gdr_flash_init {proxy}", "-c", f"gdr_flash_write {image} 0x200000",
                   "-c", "gdr_reload", "-c", "shutdown"])
    lines = [l for l in out.splitlines() if l.startswith(("MOCK", "gdr:"))]
    check("gdr_cfg_read sends the bit-reversed sync word and type-1 read of STAT",
          "MOCK drscan xc7.tap 32 0x66aa9955 32 0x00000004 32 0x80070014 32 0x00000004 32 0x00000004 -endstate DRPAUSE" in lines,
          "\n".join(lines[:8]))
    check("gdr_cfg_read reads BOOTSTS (register 0x16)", any("0x80034014" in l for l in lines))
    check("gdr_status reports USERCODE and decodes BOOTSTS",
          "gdr: USERCODE 0x12345678 (gdr builds: BUILD_HASH; 0xffffffff: none set)" in lines
          and "gdr: BOOTSTS last configuration: VALID FALLBACK" in lines, "\n".join(lines))
    check("gdr_flash_init: proxy into SRAM (0.12 or later pld naming), probe",
          [f"MOCK pld load 0 {proxy}", f"MOCK pld load xc7.pld {proxy}", "MOCK reset halt",
           "MOCK flash probe xc7.spi"] == [l for l in lines if l.startswith(("MOCK pld", "MOCK reset", "MOCK flash probe"))],
          "\n".join(lines))
    check("gdr_flash_write: erase+write at the offset, then verify_bank",
          f"MOCK flash write_image erase {image} 0x200000 bin" in lines
          and f"MOCK flash verify_bank xc7.spi {image} 0x200000" in lines, "\n".join(lines))
    check("gdr_reload: JPROGRAM", "MOCK xc7_program xc7.tap" in lines)


# ---- programming scripts -------------------------------------------------------------------------------
FAKE_OPENOCD = """#!/usr/bin/env bash
if [[ ${1:-} == --version ]]; then echo "Open On-Chip Debugger ${FAKE_OPENOCD_VERSION:-0.12.0}" >&2; exit 0; fi
printf '%s\\n' "$@" >"$FAKE_OPENOCD_LOG"
exit "${FAKE_OPENOCD_RC:-0}"
"""


def check_program_scripts(out):
    prog = FPGA / "program"
    tmp = OUT / "program"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fake = tmp / "openocd"
    fake.write_text(FAKE_OPENOCD)
    fake.chmod(0o755)
    proxy = tmp / "bscan_spi_xc7a50t.bit"
    proxy.write_bytes(b"proxy")
    log = tmp / "openocd.args"
    version = (FPGA / "VERSION").read_text().strip()
    img = {k: out / f"gdr-picoevb-{version}-{k}" for k in ("update.bin", "golden.bin", "update.bit", "golden.bit", "flash.bin")}
    big = tmp / "big.bin"
    big.write_bytes(img["update.bin"].read_bytes() + b"\xff" * int(read_layout()["SLOT_SIZE"], 16))
    wrong = tmp / "wrong-idcode.bin"
    wrong.write_bytes(img["update.bin"].read_bytes().replace(bytes.fromhex("0362c093"), bytes.fromhex("03631093")))
    layout = read_layout()

    def prog_run(script, *args, **env):
        if log.exists():
            log.unlink()
        e = {"GDR_OPENOCD": str(fake), "GDR_JTAGSPI_PROXY": str(proxy), "FAKE_OPENOCD_LOG": str(log)}
        e.update({k: str(v) for k, v in env.items()})
        rc, text = run([str(prog / script), *map(str, args)], env=e)
        return rc, text, (log.read_text().splitlines() if log.exists() else [])

    rc, text, args = prog_run("flash-update.sh", img["update.bin"])
    check("flash-update.sh writes the update image at UPDATE_OFFSET and verifies",
          rc == 0 and f"gdr_flash_write {{{img['update.bin']}}} {layout['UPDATE_OFFSET']}" in args
          and f"gdr_flash_init {{{proxy}}}" in args and "gdr_reload" not in args
          and str(prog / "picoevb.cfg") in args, f"rc {rc} {text[-300:]} {args}")
    check("flash-update.sh ends with a machine-readable line",
          re.search(rf"^flash-update: ok slot=update offset={layout['UPDATE_OFFSET']} size=\d+ sha256=[0-9a-f]{{64}} reloaded=no$",
                    text, re.M) is not None, text[-300:])
    rc, text, args = prog_run("flash-update.sh", "--reload", img["update.bin"])
    check("flash-update.sh --reload reconfigures after the write", rc == 0 and args[-4:] == ["-c", "gdr_reload", "-c", "shutdown"], str(args))
    for label, path, code in (("a golden image", img["golden.bin"], 2), ("a .bit file", img["update.bit"], 2),
                              ("an image larger than the slot", big, 2), ("an image for another FPGA", wrong, 2)):
        rc, text, args = prog_run("flash-update.sh", path)
        check(f"flash-update.sh refuses {label} and writes nothing", rc == code and not args, f"rc {rc} {text[-200:]}")
    rc, text, args = prog_run("flash-update.sh", img["update.bin"], GDR_JTAGSPI_PROXY=tmp / "absent.bit")
    check("flash-update.sh without a proxy bitstream stops (exit 3)", rc == 3 and "proxy" in text and not args, text[-200:])
    rc, text, args = prog_run("flash-update.sh", img["update.bin"], FAKE_OPENOCD_VERSION="0.10.0")
    check("flash-update.sh refuses OpenOCD 0.10", rc == 3 and "too old" in text, text[-200:])
    rc, text, args = prog_run("flash-update.sh", img["update.bin"], FAKE_OPENOCD_RC=1)
    check("flash-update.sh reports a JTAG failure (exit 4)", rc == 4 and "ftdi_sio" in text, text[-300:])
    rc, text, args = prog_run("flash-update.sh", "--dry-run", img["update.bin"])
    check("flash-update.sh --dry-run runs nothing", rc == 0 and not args and "gdr_flash_write" in text, text[-300:])

    rc, text, args = prog_run("flash-program.sh", img["flash.bin"])
    check("flash-program.sh writes the whole layout from 0 and verifies",
          rc == 0 and f"gdr_flash_write {{{img['flash.bin']}}} {layout['GOLDEN_OFFSET']}" in args, f"{text[-300:]} {args}")
    rc, text, args = prog_run("flash-program.sh", img["update.bin"])
    check("flash-program.sh refuses an image with no golden header", rc == 2 and not args, text[-200:])
    rc, text, args = prog_run("flash-program.sh", "--single", img["update.bin"])
    check("flash-program.sh --single writes a plain image at 0", rc == 0 and
          f"gdr_flash_write {{{img['update.bin']}}} {layout['GOLDEN_OFFSET']}" in args, text[-200:])
    trunc = tmp / "golden-only-layout.bin"
    trunc.write_bytes(img["golden.bin"].read_bytes() + b"\xff" * (int(layout["UPDATE_OFFSET"], 16) + 16))
    rc, text, args = prog_run("flash-program.sh", trunc)
    check("flash-program.sh refuses a layout with an empty update slot", rc == 2 and "update slot" in text, text[-200:])

    rc, text, args = prog_run("load-sram.sh", img["update.bit"])
    check("load-sram.sh loads the update .bit", rc == 0 and f"gdr_pld_load {{{img['update.bit']}}}" in args, text[-300:])
    rc, text, args = prog_run("load-sram.sh", img["golden.bit"])
    check("load-sram.sh refuses the golden .bit (IPROG)", rc == 2 and not args, text[-200:])
    rc, text, args = prog_run("load-sram.sh", img["update.bin"])
    check("load-sram.sh refuses a raw .bin", rc == 2 and not args, text[-200:])
    rc, text, args = prog_run("jtag-status.sh")
    check("jtag-status.sh reads the status registers", rc == 0 and "gdr_status" in args, text[-200:])

    rules = (prog / "99-picoevb-jtag.rules").read_text().splitlines()
    rule_lines = [l for l in rules if l.strip() and not l.startswith("#")]
    token = re.compile(r'^\s*[A-Za-z_]+(\{[^}]*\})?\s*(==|!=|=|\+=|:=)\s*"[^"]*"\s*$')
    check("udev rules: KEY op \"value\" syntax, FT230X 0403:6015",
          rule_lines and all(all(token.match(t) for t in l.split(",")) for l in rule_lines)
          and all('"0403"' in l and '"6015"' in l for l in rule_lines), str(rule_lines))


def check_docs():
    layout = read_layout()
    defs = header_defines()
    fpga_md = (REPO / "docs" / "fpga.md").read_text() if (REPO / "docs" / "fpga.md").exists() else ""
    bring = (REPO / "docs" / "bring-up.md").read_text() if (REPO / "docs" / "bring-up.md").exists() else ""
    check("docs/fpga.md states the flash layout of flash-layout.conf",
          f"0x{int(layout['UPDATE_OFFSET'], 16):06x}" in fpga_md.lower()
          and f"0x{int(layout['SLOT_SIZE'], 16):06x}" in fpga_md.lower())
    check("docs/fpga.md states the ID block offset of the header", f"0x{defs['GDR_ID_BASE']:03x}" in fpga_md.lower())
    check("docs/bring-up.md exists with a checklist", bring.count("- [ ]") >= 10)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    check_shell_syntax()
    check_no_vivado()
    out = check_build()
    check_build_failures()
    check_tcl_lib()
    check_openocd_cfg()
    if out is not None:
        check_program_scripts(out)
    check_docs()
    print(f"static: {results['pass']} passed, {results['fail']} failed")
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())

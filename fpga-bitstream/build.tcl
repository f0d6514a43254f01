# gdr PicoEVB bitstream: Vivado non-project build.
#
# Run it through build.sh, which sets the GDR_* environment below and writes the manifest afterwards:
#   vivado -mode batch -source build.tcl
#
# Produces in $GDR_OUT (NAME = gdr-picoevb-<version>):
#   NAME-update.bit   update-slot image; also the one to load into SRAM over JTAG (no IPROG, no watchdog)
#   NAME-golden.bit   golden image for flash address 0: WBSTAR = update slot, IPROG, watchdog, fallback
#   NAME-update.bin   update image as raw flash bytes (write at UPDATE_OFFSET: program/flash-update.sh)
#   NAME-golden.bin   golden image as raw flash bytes (address 0)
#   NAME-flash.mcs/.bin/.prm  the whole MultiBoot layout (golden + update) for a blank card
#   build-info.env    tool version, ID values, timing: build.sh turns it into manifest.json
# Reports and checkpoints go to $GDR_WORK.

set here [file dirname [file normalize [info script]]]
source [file join $here scripts gdr_lib.tcl]
source [file join $here ip picoevb_ip.tcl]

proc need_env {name} {
    if {![info exists ::env($name)] || $::env($name) eq ""} {
        error "build.tcl: $name is not set: run fpga-bitstream/build.sh, not build.tcl directly"
    }
    return $::env($name)
}

set part       xc7a50tcsg325-2
set top        gdr_top
set version    [need_env GDR_VERSION]
set git_hash   [need_env GDR_GIT_HASH]
set build_time [need_env GDR_BUILD_TIME]
set out        [file normalize [need_env GDR_OUT]]
set work       [file normalize [need_env GDR_WORK]]
set jobs       [expr {[info exists ::env(GDR_JOBS)] ? $::env(GDR_JOBS) : 2}]
set name       "gdr-picoevb-$version"
set layout     [gdr_read_layout [file join $here flash-layout.conf]]

set version_word [gdr_version_word $version]
if {![regexp {^[0-9a-f]{8}} $git_hash hash8]} { error "GDR_GIT_HASH '$git_hash' is not a git commit" }
set hash_word  [format 0x%08X [scan $hash8 %x]]
if {![string is digit -strict $build_time] || $build_time > 0xFFFFFFFF} {
    error "GDR_BUILD_TIME '$build_time' is not a 32-bit Unix time"
}
set time_word  [format 0x%08X $build_time]

set tool_version [version -short]
if {$tool_version ne "2018.3"} {
    puts "WARNING: gdr: Vivado $tool_version; the reference design was built with 2018.3. IP defaults and\
          XDMA behaviour can differ between versions: check the bring-up list (docs/bring-up.md)."
}

file mkdir $out $work [file join $work ip] [file join $work reports]
set reports [file join $work reports]

# ---- IP ------------------------------------------------------------------------------------------------
set_param general.maxThreads $jobs
create_project -in_memory -part $part
set_property target_language Verilog [current_project]
set ips [gdr_create_ips [file join $work ip]]
foreach ip $ips {
    generate_target all $ip
    synth_ip $ip
}

# ---- synthesis -----------------------------------------------------------------------------------------
set rtl [file join $here rtl]
read_verilog [list [file join $rtl gdr_top.v] [file join $rtl gdr_bar0_decode.v] [file join $rtl gdr_id_block.v] \
    [file join $rtl gdr_stream.v] [file join $rtl gdr_dma_decode.v]]
read_xdc [file join $here constraints picoevb.xdc]

synth_design -top $top -part $part -include_dirs [list $rtl] \
    -generic DESIGN_VERSION=[gdr_verilog_hex32 $version_word] \
    -generic BUILD_HASH=[gdr_verilog_hex32 $hash_word] \
    -generic BUILD_TIME=[gdr_verilog_hex32 $time_word]
write_checkpoint -force [file join $work post_synth.dcp]
report_utilization -file [file join $reports post_synth_utilization.rpt]

# ---- implementation ------------------------------------------------------------------------------------
opt_design
place_design
phys_opt_design
route_design
write_checkpoint -force [file join $work post_route.dcp]
report_timing_summary -max_paths 10 -file [file join $reports post_route_timing.rpt]
report_utilization -file [file join $reports post_route_utilization.rpt]
report_drc -file [file join $reports post_route_drc.rpt]

set wns [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -setup]]
set whs [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -hold]]
if {$wns eq "" || $whs eq "" || $wns < 0 || $whs < 0} {
    error "gdr: timing not met (WNS $wns ns, WHS $whs ns): see $reports/post_route_timing.rpt"
}

# ---- bitstreams ----------------------------------------------------------------------------------------
# USERID = BUILD_HASH, so JTAG (USERCODE, program/jtag-status.sh) tells the build apart without PCIe.
set_property BITSTREAM.CONFIG.USERID $hash_word [current_design]
set_property BITSTREAM.CONFIG.CONFIGFALLBACK ENABLE [current_design]

# Update image: a plain image that jumps nowhere and arms no watchdog (safe to load over JTAG, which takes
# far longer than any watchdog setting).
set_property BITSTREAM.CONFIG.NEXT_CONFIG_REBOOT DISABLE [current_design]
set update_bit [file join $out $name-update.bit]
write_bitstream -force $update_bit

# Golden image: its header arms the watchdog and IPROGs to the update slot; an update that fails its
# IDCODE/CRC check or never configures (blank slot, watchdog) falls back to this image.
set_property BITSTREAM.CONFIG.NEXT_CONFIG_REBOOT ENABLE [current_design]
set_property BITSTREAM.CONFIG.NEXT_CONFIG_ADDR [format 0x%08X [dict get $layout UPDATE_OFFSET]] [current_design]
set_property BITSTREAM.CONFIG.TIMER_CFG [dict get $layout GOLDEN_TIMER_CFG] [current_design]
set golden_bit [file join $out $name-golden.bit]
write_bitstream -force $golden_bit

# ---- flash images --------------------------------------------------------------------------------------
set flash_mb [expr {[dict get $layout FLASH_SIZE] / 0x100000}]
set golden_at [format 0x%08X [dict get $layout GOLDEN_OFFSET]]
set update_at [format 0x%08X [dict get $layout UPDATE_OFFSET]]
proc cfgmem {format file loadbit} {
    global flash_mb
    write_cfgmem -force -format $format -interface SPIx4 -size $flash_mb -loadbit $loadbit -file $file
}
cfgmem mcs [file join $out $name-flash.mcs] "up $golden_at $golden_bit up $update_at $update_bit"
cfgmem bin [file join $out $name-flash.bin] "up $golden_at $golden_bit up $update_at $update_bit"
cfgmem bin [file join $out $name-update.bin] "up 0x00000000 $update_bit"
cfgmem bin [file join $out $name-golden.bin] "up 0x00000000 $golden_bit"

set slot [expr {[dict get $layout SLOT_SIZE]}]
foreach img [list $name-update.bin $name-golden.bin] {
    set bytes [file size [file join $out $img]]
    if {$bytes > $slot} {
        error "gdr: $img is $bytes bytes, more than a $slot-byte flash slot (is COMPRESS off?)"
    }
}

# ---- facts for the manifest ----------------------------------------------------------------------------
set f [open [file join $out build-info.env] w]
puts $f "TOOL=Vivado"
puts $f "TOOL_VERSION=[gdr_sanitize $tool_version]"
puts $f "TOOL_BUILD=[gdr_sanitize [lindex [split [version] \n] 0]]"
puts $f "PART=$part"
puts $f "VERSION_WORD=$version_word"
puts $f "BUILD_HASH_WORD=$hash_word"
puts $f "BUILD_TIME_WORD=$time_word"
puts $f "WNS_NS=[gdr_sanitize $wns]"
puts $f "WHS_NS=[gdr_sanitize $whs]"
foreach ip $ips {
    puts $f "IP_[string toupper $ip]=[gdr_sanitize [get_property IPDEF $ip]]"
}
set xdma [lindex [dict get $gdr_ip_configs xdma_0] 1]
foreach {key prop} {PCI_VENDOR vendor_id PCI_DEVICE pf0_device_id PCI_SUBSYSTEM_VENDOR pf0_subsystem_vendor_id
                    PCI_SUBSYSTEM pf0_subsystem_id PCI_CLASS pf0_class_code} {
    puts $f "$key=[string tolower [dict get $xdma CONFIG.$prop]]"
}
close $f
puts "gdr: build done: $out"

# Helpers shared by build.tcl and the checks in sim/ (plain Tcl 8.5: runs in Vivado and in tclsh).

# MAJOR.MINOR.PATCH -> the ID block's DESIGN_VERSION word: major[31:24] minor[23:16] patch[15:0]
# (picoevb_regs::idblock::version; sim/run.sh checks the two agree).
proc gdr_version_word {version} {
    if {![regexp {^([0-9]+)\.([0-9]+)\.([0-9]+)$} [string trim $version] -> major minor patch]} {
        error "version '$version' is not MAJOR.MINOR.PATCH"
    }
    # Leading zeros must not turn a field into octal.
    foreach v {major minor patch} { set $v [scan [set $v] %d] }
    if {$major > 255 || $minor > 255 || $patch > 65535} {
        error "version '$version' does not fit major<256, minor<256, patch<65536"
    }
    return [format 0x%08X [expr {($major << 24) | ($minor << 16) | $patch}]]
}

# A 32-bit value as the Verilog literal synth_design -generic takes.
proc gdr_verilog_hex32 {value} {
    return [format "32'h%08X" [expr {$value & 0xFFFFFFFF}]]
}

# flash-layout.conf -> dict KEY value. Only KEY=VALUE lines and comments are allowed.
proc gdr_read_layout {path} {
    set f [open $path r]
    set text [read $f]
    close $f
    set layout [dict create]
    set n 0
    foreach line [split $text "\n"] {
        incr n
        set line [string trim $line]
        if {$line eq "" || [string index $line 0] eq "#"} { continue }
        if {![regexp {^([A-Z_][A-Z0-9_]*)=([A-Za-z0-9_.x-]+)$} $line -> key value]} {
            error "$path:$n: not a KEY=VALUE line: $line"
        }
        dict set layout $key $value
    }
    foreach key {FLASH_PART FLASH_SIZE GOLDEN_OFFSET UPDATE_OFFSET SLOT_SIZE GOLDEN_TIMER_CFG} {
        if {![dict exists $layout $key]} { error "$path: $key is missing" }
    }
    gdr_check_layout $layout
    return $layout
}

# The slots must lie inside the flash, must not overlap, and must start on 64 KiB erase blocks.
proc gdr_check_layout {layout} {
    set size   [expr {[dict get $layout FLASH_SIZE]}]
    set slot   [expr {[dict get $layout SLOT_SIZE]}]
    set golden [expr {[dict get $layout GOLDEN_OFFSET]}]
    set update [expr {[dict get $layout UPDATE_OFFSET]}]
    if {$golden != 0} { error "the golden image must start at flash address 0 (the FPGA boots from there)" }
    foreach {name off} [list golden $golden update $update] {
        if {$off % 0x10000} { error "$name slot at $off is not 64 KiB aligned" }
        if {$off + $slot > $size} { error "$name slot ends past the flash" }
    }
    if {$update < $golden + $slot} { error "the update slot overlaps the golden slot" }
    return 1
}

# Keep only characters that need no quoting in the build-info file or JSON.
proc gdr_sanitize {text} {
    regsub -all {[^A-Za-z0-9 ._:/()+-]} [string trim $text] _ text
    return $text
}

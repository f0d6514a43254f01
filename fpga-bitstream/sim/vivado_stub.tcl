# A stand-in for Vivado's Tcl commands, so build.tcl runs end to end under plain tclsh (sim/fake-bin/vivado).
#
# It implements only what build.tcl uses: any other command is an error, so a typo or a new Vivado command in
# build.tcl shows up here. Every setting the build makes (IP properties, XDC pins and properties, bitstream
# properties per written bitstream, synth generics, write_cfgmem layouts) is logged one per line to
# $GDR_FAKE_VIVADO_LOG for sim/check_static.py to check against the facts.
#
# Written bitstreams are small synthetic images with the same configuration packets a real one starts with
# (sync word, TIMER, WBSTAR, CMD = IPROG or NULL, IDCODE), derived from the bitstream properties, so the
# flash scripts' image checks can be exercised on them. They configure nothing.

set stub_log [open $::env(GDR_FAKE_VIVADO_LOG) a]
proc log {args} { puts $::stub_log [join $args "\t"]; flush $::stub_log }

rename unknown _tcl_unknown
proc unknown {args} { error "fake vivado: unsupported command: [lindex $args 0]" }

set stub_ips [dict create]          ;# module -> dict of properties
set stub_design_props [dict create] ;# property -> value on current_design
set stub_have_design 0

proc version {args} {
    set v [expr {[info exists ::env(GDR_FAKE_VIVADO_VERSION)] ? $::env(GDR_FAKE_VIVADO_VERSION) : "2018.3"}]
    if {$args eq "-short"} { return $v }
    return "Vivado v$v (64-bit)\nSW Build 0000000 (fake)"
}

proc set_param {name value} {
    if {$name ne "general.maxThreads" || ![string is integer -strict $value]} { error "set_param $name $value" }
    log PARAM $name $value
}
proc create_project {args} {
    if {[lsearch $args -in_memory] < 0} { error "create_project: build.tcl must stay in-memory (non-project)" }
    set i [lsearch $args -part]
    log PROJECT_PART [lindex $args [expr {$i + 1}]]
}
proc current_project {} { return project:in_memory }
proc current_design {} {
    if {!$::stub_have_design} { error "current_design: no design open yet" }
    return design:top
}

# -opt value pairs into array a; flags (no value) map to 1.
proc options {arrayName argv flags} {
    upvar $arrayName a
    for {set i 0} {$i < [llength $argv]} {incr i} {
        set opt [lindex $argv $i]
        if {[lsearch -exact $flags $opt] >= 0} { set a($opt) 1; continue }
        if {![string match -* $opt]} { error "unexpected argument '$opt'" }
        incr i
        set a($opt) [lindex $argv $i]
    }
}

proc create_ip {args} {
    options a $args -force
    foreach key {-name -vendor -library -module_name -dir} {
        if {![info exists a($key)]} { error "create_ip: $key missing" }
    }
    dict set ::stub_ips $a(-module_name) [dict create IPDEF xilinx.com:ip:$a(-name):0.0]
    log IP $a(-module_name) $a(-name)
}
proc get_ips {{pattern *}} {
    set found [lsearch -all -inline [dict keys $::stub_ips] $pattern]
    if {$found eq ""} { error "get_ips: no IP matches $pattern" }
    return $found
}

proc set_property {args} {
    if {[lindex $args 0] eq "-dict"} {
        lassign $args - props objects
    } else {
        lassign $args key value objects
        set props [list $key $value]
    }
    foreach obj $objects {
        if {[dict exists $::stub_ips $obj]} {
            dict for {k v} $props { dict set ::stub_ips $obj $k $v; log IPPROP $obj $k $v }
        } elseif {$obj eq "design:top"} {
            dict for {k v} $props { dict set ::stub_design_props $k $v; log DESIGNPROP $k $v }
        } elseif {$obj eq "project:in_memory"} {
            dict for {k v} $props { log PROJECTPROP $k $v }
        } else {
            error "set_property: unknown object '$obj'"
        }
    }
}

proc get_property {key object} {
    if {[dict exists $::stub_ips $object]} {
        if {[dict exists $::stub_ips $object $key]} { return [dict get $::stub_ips $object $key] }
        return ""
    }
    if {[string match timing_path:* $object] && $key eq "SLACK"} {
        set kind [lindex [split $object :] 1]
        if {$kind eq "setup" && [info exists ::env(GDR_FAKE_WNS)]} { return $::env(GDR_FAKE_WNS) }
        return 0.250
    }
    error "get_property: unknown $key of $object"
}

proc generate_target {what objects} {
    foreach o $objects { if {![dict exists $::stub_ips $o]} { error "generate_target: not an IP: $o" } }
}
proc synth_ip {objects} {
    foreach o $objects { if {![dict exists $::stub_ips $o]} { error "synth_ip: not an IP: $o" } }
}

proc read_verilog {files} {
    foreach f $files {
        if {![file exists $f]} { error "read_verilog: no such file $f" }
        log VERILOG [file tail $f]
    }
}

# XDC files are Tcl: run them with constraint stand-ins and log what they set.
proc read_xdc {file} {
    if {![file exists $file]} { error "read_xdc: no such file $file" }
    set x [interp create -safe]
    $x alias get_ports xdc_get_ports
    $x alias set_property xdc_set_property
    $x alias create_clock xdc_create_clock
    $x alias set_false_path xdc_noop
    $x alias current_design xdc_current_design
    set f [open $file]
    set text [read $f]
    close $f
    if {[catch {$x eval $text} err]} { error "read_xdc $file: $err" }
    interp delete $x
}
proc xdc_get_ports {pattern} { return [list port:$pattern] }
proc xdc_current_design {} { return design:xdc }
proc xdc_noop {args} {}
proc xdc_create_clock {args} {
    array set a [lrange $args 0 end-1]
    log CLOCK $a(-name) $a(-period) [lindex $args end]
}
proc xdc_set_property {args} {
    if {[lindex $args 0] eq "-dict"} {
        lassign $args - props objects
    } else {
        lassign $args key value objects
        set props [list $key $value]
    }
    foreach obj $objects {
        dict for {k v} $props {
            if {[string match port:* $obj]} {
                log PORTPROP [string range $obj 5 end] $k $v
            } elseif {$obj eq "design:xdc"} {
                dict set ::stub_design_props $k $v
                log XDCPROP $k $v
            } else {
                error "set_property: unknown object '$obj'"
            }
        }
    }
}

proc synth_design {args} {
    set generics {}
    for {set i 0} {$i < [llength $args]} {incr i} {
        set opt [lindex $args $i]
        switch -- $opt {
            -top { incr i; log TOP [lindex $args $i] }
            -part { incr i; log SYNTH_PART [lindex $args $i] }
            -include_dirs {
                incr i
                foreach d [lindex $args $i] { if {![file isdirectory $d]} { error "synth_design: no dir $d" } }
            }
            -generic {
                incr i
                set g [lindex $args $i]
                if {![regexp {^([A-Z_]+)=32'h([0-9A-F]{8})$} $g -> name value]} {
                    error "synth_design: generic '$g' is not NAME=32'hXXXXXXXX"
                }
                log GENERIC $name 0x$value
            }
            default { error "synth_design: unexpected option $opt" }
        }
    }
    set ::stub_have_design 1
}

foreach cmd {opt_design place_design phys_opt_design route_design} {
    proc $cmd {args} "if {!\$::stub_have_design} { error \"$cmd: no design\" }; log STEP $cmd"
}
proc write_checkpoint {args} { close [open [lindex $args end] w] }
proc report_timing_summary {args} { stub_report $args }
proc report_utilization {args} { stub_report $args }
proc report_drc {args} { stub_report $args }
proc stub_report {args} {
    set args [lindex $args 0]
    set i [lsearch $args -file]
    if {$i >= 0} { close [open [lindex $args [expr {$i + 1}]] w] }
}
proc get_timing_paths {args} {
    return [expr {[lsearch $args -hold] >= 0 ? "timing_path:hold" : "timing_path:setup"}]
}

# ---- synthetic bitstreams ------------------------------------------------------------------------------
proc word {hex} { return [binary format I [expr {$hex}]] }
proc prop {name default} {
    if {[dict exists $::stub_design_props $name]} { return [dict get $::stub_design_props $name] }
    return $default
}
proc write_bitstream {args} {
    set file [lindex $args end]
    set props {}
    dict for {k v} $::stub_design_props { if {[string match BITSTREAM.* $k]} { lappend props "$k=$v" } }
    log BITSTREAM [file tail $file] [join [lsort $props] ,]
    set reboot [string equal -nocase [prop BITSTREAM.CONFIG.NEXT_CONFIG_REBOOT ENABLE] ENABLE]
    set wbstar [prop BITSTREAM.CONFIG.NEXT_CONFIG_ADDR 0]
    set iprog [expr {$reboot && $wbstar != 0 ? 0xF : 0}]
    set data [string repeat \xFF 32]
    append data [word 0x000000BB] [word 0x11220044] [word 0xFFFFFFFF] [word 0xFFFFFFFF] [word 0xAA995566]
    append data [word 0x20000000] [word 0x30022001] [word [prop BITSTREAM.CONFIG.TIMER_CFG 0]]
    append data [word 0x30020001] [word $wbstar] [word 0x30008001] [word $iprog] [word 0x20000000]
    append data [word 0x30008001] [word 0x00000007] [word 0x30018001] [word 0x0362C093]
    append data [word 0x30008001] [word 0x0000000D]
    # .bit header: a field with the part name, then the length-prefixed configuration data
    set header "\x00\x09\x0f\xf0\x0f\xf0\x0f\xf0\x0f\xf0\x00\x00\x01a\x00\x08gdr_top\x00b\x00\x0c7a50tcsg325\x00e"
    set f [open $file wb]
    puts -nonewline $f $header[binary format I [string length $data]]$data
    close $f
}

proc bit_payload {file} {
    set f [open $file rb]
    set bytes [read $f]
    close $f
    set i [string first "\x00e" $bytes]
    binary scan [string range $bytes [expr {$i + 2}] [expr {$i + 5}]] I len
    return [string range $bytes [expr {$i + 6}] [expr {$i + 5 + $len}]]
}

proc write_cfgmem {args} {
    options a $args -force
    foreach key {-format -interface -size -loadbit -file} {
        if {![info exists a($key)]} { error "write_cfgmem: $key missing" }
    }
    set image ""
    foreach {dir addr bit} $a(-loadbit) {
        if {$dir ne "up"} { error "write_cfgmem: only 'up' loads are used" }
        set payload [bit_payload $bit]
        set pad [expr {$addr - [string length $image]}]
        if {$pad < 0} { error "write_cfgmem: $bit at $addr overlaps the previous image" }
        append image [string repeat \xFF $pad] $payload
    }
    if {[string length $image] > $a(-size) * 0x100000} { error "write_cfgmem: image larger than the flash" }
    log CFGMEM [file tail $a(-file)] $a(-format) $a(-interface) $a(-size) [join $a(-loadbit) " "]
    set base [file rootname $a(-file)]
    switch -- [string tolower $a(-format)] {
        bin {
            set f [open $a(-file) wb]; puts -nonewline $f $image; close $f
        }
        mcs {
            set f [open $a(-file) w]
            for {set off 0} {$off < [string length $image]} {incr off 16} {
                if {$off % 0x10000 == 0} {
                    set rec [format "02000004%04X" [expr {$off >> 16}]]
                    puts $f ":$rec[ihex_sum $rec]"
                }
                set chunk [string range $image $off [expr {$off + 15}]]
                if {$chunk eq [string repeat \xFF [string length $chunk]]} { continue }
                binary scan $chunk H* hex
                set rec [format "%02X%04X00%s" [expr {[string length $hex] / 2}] [expr {$off & 0xFFFF}] \
                    [string toupper $hex]]
                puts $f ":$rec[ihex_sum $rec]"
            }
            puts $f ":00000001FF"
            close $f
        }
        default { error "write_cfgmem: format $a(-format)" }
    }
    set f [open $base.prm w]; puts $f "fake prm for [file tail $a(-file)]"; close $f
}
proc ihex_sum {rec} {
    set sum 0
    foreach {h l} [split $rec ""] { incr sum [scan $h$l %x] }
    return [format %02X [expr {(-$sum) & 0xFF}]]
}

# ---- run the script ------------------------------------------------------------------------------------
set argv0 [lindex $argv 0]
set argv [lrange $argv 1 end]
set argc [llength $argv]
if {[catch {uplevel #0 [list source $argv0]} err opts]} {
    puts stderr "ERROR: $err"
    log ERROR $err
    exit 1
}
exit 0

# The four Xilinx IP cores of the gdr PicoEVB design, configured like NVIDIA's jetson-rdma-picoevb bitstream
# (shared/facts/reference-driver.md §7.2, xdma.md §1) so the same driver binds and sees the same BARs.
# Sourced by build.tcl; sim/run.sh runs it under a Vivado stand-in and checks the settings against the facts.
#
# Each core is created with `create_ip` and configured with one dict; gdr_create_ip reads every property back
# and stops the build if Vivado ignored one (it only warns when a parameter is disabled in the chosen mode).

# Must agree with AXI_ID_WIDTH in rtl/gdr_top.v (checked by sim/check_static.py).
set gdr_axi_id_width 2

set gdr_ip_configs [dict create]

# XDMA: AXI memory-mapped DMA, 1 H2C + 1 C2H channel, PCIe Gen2 x1 at 125 MHz / 64 bit.
# BAR0 = AXI-Lite master (4 KiB, GPIO + ID block), BAR1 = the XDMA's own registers (64 KiB).
dict set gdr_ip_configs xdma_0 [list xdma [dict create \
    CONFIG.mode_selection               Basic \
    CONFIG.pl_link_cap_max_link_speed   5.0_GT/s \
    CONFIG.pl_link_cap_max_link_width   X1 \
    CONFIG.ref_clk_freq                 100_MHz \
    CONFIG.plltype                      QPLL1 \
    CONFIG.axi_data_width               64_bit \
    CONFIG.axisten_freq                 125 \
    CONFIG.axi_addr_width               64 \
    CONFIG.axi_id_width                 $gdr_axi_id_width \
    CONFIG.xdma_axi_intf_mm             AXI_Memory_Mapped \
    CONFIG.xdma_rnum_chnl               1 \
    CONFIG.xdma_wnum_chnl               1 \
    CONFIG.xdma_num_usr_irq             1 \
    CONFIG.xdma_axilite_slave           false \
    CONFIG.cfg_mgmt_if                  false \
    CONFIG.axilite_master_en            true \
    CONFIG.axilite_master_scale         Kilobytes \
    CONFIG.axilite_master_size          4 \
    CONFIG.axil_master_64bit_en         false \
    CONFIG.axil_master_prefetchable     false \
    CONFIG.pciebar2axibar_axil_master   0x00000000 \
    CONFIG.xdma_scale                   Kilobytes \
    CONFIG.xdma_size                    64 \
    CONFIG.xdma_pcie_64bit_en           false \
    CONFIG.xdma_pcie_prefetchable       false \
    CONFIG.vendor_id                    10DE \
    CONFIG.pf0_device_id                0001 \
    CONFIG.pf0_revision_id              00 \
    CONFIG.pf0_subsystem_vendor_id      10DE \
    CONFIG.pf0_subsystem_id             0001 \
    CONFIG.pf0_base_class_menu          Memory_controller \
    CONFIG.pf0_sub_class_interface_menu Other_memory_controller \
    CONFIG.pf0_class_code_base          05 \
    CONFIG.pf0_class_code_sub           80 \
    CONFIG.pf0_class_code_interface     00 \
    CONFIG.pf0_class_code               058000 \
    CONFIG.pf0_interrupt_pin            INTA \
    CONFIG.pf0_msi_enabled              true \
    CONFIG.pf0_msi_cap_multimsgcap      1_vector \
    CONFIG.pf0_msix_enabled             false \
]]

# 64 KiB of DMA memory: AXI4 BRAM controller (64-bit, 8192 deep, single port) and its block RAM.
dict set gdr_ip_configs axi_bram_ctrl_0 [list axi_bram_ctrl [dict create \
    CONFIG.PROTOCOL                     AXI4 \
    CONFIG.DATA_WIDTH                   64 \
    CONFIG.ID_WIDTH                     $gdr_axi_id_width \
    CONFIG.MEM_DEPTH                    8192 \
    CONFIG.SINGLE_PORT_BRAM             1 \
    CONFIG.ECC_TYPE                     0 \
    CONFIG.READ_LATENCY                 1 \
    CONFIG.SUPPORTS_NARROW_BURST        0 \
    CONFIG.BMG_INSTANCE                 EXTERNAL \
]]

dict set gdr_ip_configs blk_mem_gen_0 [list blk_mem_gen [dict create \
    CONFIG.use_bram_block                            Stand_Alone \
    CONFIG.Memory_Type                               Single_Port_RAM \
    CONFIG.Write_Width_A                             64 \
    CONFIG.Read_Width_A                              64 \
    CONFIG.Write_Depth_A                             8192 \
    CONFIG.Use_Byte_Write_Enable                     true \
    CONFIG.Byte_Size                                 8 \
    CONFIG.Enable_A                                  Use_ENA_Pin \
    CONFIG.Use_RSTA_Pin                              false \
    CONFIG.Register_PortA_Output_of_Memory_Primitives false \
]]

# AXI GPIO: channel 1 = 3 LED outputs (active-low), channel 2 = the 4 iocon pins, inputs at reset.
# Its interrupt goes to XDMA usr_irq_req[0].
dict set gdr_ip_configs axi_gpio_0 [list axi_gpio [dict create \
    CONFIG.C_IS_DUAL                    1 \
    CONFIG.C_GPIO_WIDTH                 3 \
    CONFIG.C_ALL_OUTPUTS                1 \
    CONFIG.C_ALL_INPUTS                 0 \
    CONFIG.C_DOUT_DEFAULT               0x00000000 \
    CONFIG.C_GPIO2_WIDTH                4 \
    CONFIG.C_ALL_INPUTS_2               0 \
    CONFIG.C_ALL_OUTPUTS_2              0 \
    CONFIG.C_TRI_DEFAULT_2              0x0000000F \
    CONFIG.C_INTERRUPT_PRESENT          1 \
]]

# Vivado may echo a value in another case or, for addresses, at another width: compare accordingly.
proc gdr_same_value {have want} {
    if {[string equal -nocase $have $want]} { return 1 }
    set hex {^0[xX][0-9a-fA-F]+$}
    return [expr {[regexp $hex $have] && [regexp $hex $want] && $have == $want}]
}

# Creates one core in ipdir and checks that every property took.
proc gdr_create_ip {module ipdir} {
    global gdr_ip_configs
    lassign [dict get $gdr_ip_configs $module] name props
    create_ip -name $name -vendor xilinx.com -library ip -module_name $module -dir $ipdir -force
    set ip [get_ips $module]
    set_property -dict $props $ip
    dict for {key want} $props {
        set have [get_property $key $ip]
        if {![gdr_same_value $have $want]} {
            error "IP $module: $key is '$have' after setting '$want' (is the parameter disabled in this mode\
                   or this Vivado version?)"
        }
    }
    return $ip
}

proc gdr_create_ips {ipdir} {
    global gdr_ip_configs
    set ips {}
    foreach module [dict keys $gdr_ip_configs] {
        lappend ips [gdr_create_ip $module $ipdir]
    }
    return $ips
}

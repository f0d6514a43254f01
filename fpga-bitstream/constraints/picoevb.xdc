# gdr PicoEVB (XC7A50T-2CSG325C): pins and configuration, common to every bitstream variant.
# Pins per shared/facts/picoevb-board.md §1.1 and reference-driver.md §7.4 (checked by sim/check_static.py).
# MultiBoot settings differ between the golden and the update image and are set in build.tcl.

# ---- PCIe -----------------------------------------------------------------------------------------------
# PERST#: pulled down so the core stays in reset while the slot does not drive it.
set_property -dict {PACKAGE_PIN A10 IOSTANDARD LVCMOS33 PULLDOWN true} [get_ports perst_n]
set_false_path -from [get_ports perst_n]

# CLKREQ#: driven low by the design (reference clock always wanted).
set_property -dict {PACKAGE_PIN A9 IOSTANDARD LVCMOS33 PULLDOWN true} [get_ports clkreq_n]

# 100 MHz reference clock into IBUFDS_GTE2; the N side follows from the P pin.
set_property PACKAGE_PIN B6 [get_ports refclk_p]
create_clock -name pcie_refclk -period 10.000 [get_ports refclk_p]

# Lane 0 (GTP).
set_property PACKAGE_PIN G4 [get_ports per0_p]
set_property PACKAGE_PIN G3 [get_ports per0_n]
set_property PACKAGE_PIN B2 [get_ports pet0_p]
set_property PACKAGE_PIN B1 [get_ports pet0_n]

# ---- LEDs (active-low) -----------------------------------------------------------------------------------
# GPIO_DATA bit n drives leds[n]; which of the board labels A/B/C each pin lights is a bring-up check.
set_property -dict {PACKAGE_PIN V12 IOSTANDARD LVCMOS33 PULLUP true DRIVE 8} [get_ports {leds[0]}]
set_property -dict {PACKAGE_PIN V13 IOSTANDARD LVCMOS33 PULLUP true DRIVE 8} [get_ports {leds[1]}]
set_property -dict {PACKAGE_PIN V14 IOSTANDARD LVCMOS33 PULLUP true DRIVE 8} [get_ports {leds[2]}]

# ---- iocon[3:0]: GPIO channel 2 (inputs at reset) ------------------------------------------------------
set_property -dict {PACKAGE_PIN A14 IOSTANDARD LVCMOS33} [get_ports {iocon[0]}]
set_property -dict {PACKAGE_PIN A13 IOSTANDARD LVCMOS33} [get_ports {iocon[1]}]
set_property -dict {PACKAGE_PIN B12 IOSTANDARD LVCMOS33} [get_ports {iocon[2]}]
set_property -dict {PACKAGE_PIN A12 IOSTANDARD LVCMOS33} [get_ports {iocon[3]}]
# Asynchronous pins: no timing relation to the AXI clock.
set_false_path -from [get_ports {iocon[*]}]
set_false_path -to [get_ports {iocon[*]}]
set_false_path -to [get_ports {leds[*]}]

# ---- Configuration: quad SPI flash (S25FL132K), compressed bitstream -----------------------------------
set_property CONFIG_VOLTAGE 3.3 [current_design]
set_property CFGBVS VCCO [current_design]
set_property CONFIG_MODE SPIx4 [current_design]
set_property BITSTREAM.CONFIG.SPI_BUSWIDTH 4 [current_design]
set_property BITSTREAM.CONFIG.CONFIGRATE 66 [current_design]
set_property BITSTREAM.CONFIG.SPI_FALL_EDGE YES [current_design]
# Required: an uncompressed XC7A50T image (~2.19 MB) does not fit a 2 MiB MultiBoot slot.
set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]

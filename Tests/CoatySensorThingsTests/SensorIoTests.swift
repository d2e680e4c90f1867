import CoatyCore
import CoatySensorThings
import Foundation
import Testing

/// A fake sysfs tree in a temporary directory, removed when the test ends.
struct FakeSysfs: ~Copyable {
    let root: String

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("sysfs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func write(_ relativePath: String, _ text: String) throws {
        let path = root + "/" + relativePath
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true
        )
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }
}

@Suite("Sensor IO")
struct SensorIoTests {
    @Test("MockSensorIo reads 0 until written, as Coaty JS's does, then the value written")
    func mockLikeCoatyJS() async throws {
        let io = MockSensorIo()
        #expect(try await io.read() == 0)
        #expect(try await io.read() == 0)
        try await io.write("on")
        #expect(try await io.read() == "on")
        #expect(io.readCount == 3)
    }

    @Test("MockSensorIo gives its values in turn and starts over")
    func mockSequence() async throws {
        let io = MockSensorIo(values: [20.5, 21, 21.5])
        var read: [JSONValue] = []
        for _ in 0..<7 { read.append(try await io.read()) }
        #expect(read == [20.5, 21, 21.5, 20.5, 21, 21.5, 20.5])
        #expect(try await MockSensorIo(values: []).read() == .null)
    }

    @Test("A read-only IO refuses writes with an error naming it")
    func readOnlyRefusesWrites() async throws {
        let io = LinuxTemperatureSensorIo(input: TemperatureInput(path: "/nonexistent", kind: .hwmon, label: "x"))
        await #expect(throws: SensorIoError.notWritable("LinuxTemperatureSensorIo")) {
            try await io.write(1)
        }
    }

    @Test("hwmon inputs come first in numeric order with their labels, then thermal zones; millidegrees become °C")
    func hwmonAndThermalZones() async throws {
        let sysfs = try FakeSysfs()
        try sysfs.write("sys/class/hwmon/hwmon10/name", "nvme\n")
        try sysfs.write("sys/class/hwmon/hwmon10/temp1_input", "38850\n")
        try sysfs.write("sys/class/hwmon/hwmon2/name", "coretemp\n")
        try sysfs.write("sys/class/hwmon/hwmon2/temp1_input", "47500\n")
        try sysfs.write("sys/class/hwmon/hwmon2/temp1_label", "Package id 0\n")
        try sysfs.write("sys/class/hwmon/hwmon2/temp12_input", "-1250\n")
        try sysfs.write("sys/class/hwmon/hwmon2/temp2_input", "45000\n")
        try sysfs.write("sys/class/hwmon/hwmon2/temp2_max", "100000\n")
        try sysfs.write("sys/class/hwmon/hwmon3/name", "acpi_fan\n")  // no temperature inputs
        try sysfs.write("sys/class/thermal/thermal_zone1/temp", "51000\n")
        try sysfs.write("sys/class/thermal/thermal_zone1/type", "x86_pkg_temp\n")
        try sysfs.write("sys/class/thermal/thermal_zone0/type", "acpitz\n")
        try sysfs.write("sys/class/thermal/thermal_zone0/temp", "27800\n")
        try sysfs.write("sys/class/thermal/cooling_device0/type", "Processor\n")

        let inputs = LinuxTemperatureSensorIo.availableInputs(root: sysfs.root)
        #expect(
            inputs.map(\.label) == [
                "coretemp Package id 0", "coretemp temp2", "coretemp temp12", "nvme temp1", "acpitz", "x86_pkg_temp",
            ]
        )
        #expect(inputs.map(\.kind) == [.hwmon, .hwmon, .hwmon, .hwmon, .thermalZone, .thermalZone])
        #expect(inputs[0].path == sysfs.root + "/sys/class/hwmon/hwmon2/temp1_input")

        var celsius: [JSONValue] = []
        for input in inputs { celsius.append(try await LinuxTemperatureSensorIo(input: input).read()) }
        #expect(celsius == [47.5, 45, -1.25, 38.85, 27.8, 51])

        let first = try LinuxTemperatureSensorIo(root: sysfs.root)
        #expect(first.input == inputs[0])
        let zone = try LinuxTemperatureSensorIo(root: sysfs.root) { $0.kind == .thermalZone }
        #expect(try zone.readCelsius() == 27.8)
        // The value is read anew each time.
        try sysfs.write("sys/class/thermal/thermal_zone0/temp", "30000\n")
        #expect(try zone.readCelsius() == 30)
    }

    @Test("Thermal zones alone are found")
    func thermalOnly() throws {
        let sysfs = try FakeSysfs()
        try sysfs.write("sys/class/thermal/thermal_zone3/temp", "42000")
        let io = try LinuxTemperatureSensorIo(root: sysfs.root + "/")
        #expect(io.input.label == "thermal_zone3")
        #expect(try io.readCelsius() == 42)
    }

    @Test("Without any input the error names the places searched and the way out")
    func noSensor() throws {
        let sysfs = try FakeSysfs()
        try sysfs.write("sys/class/hwmon/hwmon0/name", "acpi_fan")
        do {
            _ = try LinuxTemperatureSensorIo(root: sysfs.root)
            Issue.record("expected an error")
        } catch {
            #expect(
                error
                    == .noTemperatureSensor(searched: [
                        sysfs.root + "/sys/class/hwmon/hwmon*/temp*_input",
                        sysfs.root + "/sys/class/thermal/thermal_zone*/temp",
                    ])
            )
            #expect(error.description.contains("MockSensorIo"))
        }
    }

    @Test("A file without millidegrees, or gone, is an unreadable error with its path")
    func unreadable() throws {
        let sysfs = try FakeSysfs()
        try sysfs.write("sys/class/hwmon/hwmon0/temp1_input", "N/A\n")
        let io = try LinuxTemperatureSensorIo(root: sysfs.root)
        #expect(
            throws: SensorIoError.unreadable(
                path: io.input.path,
                reason: "expected millidegrees Celsius, found \"N/A\""
            )
        ) {
            try io.readCelsius()
        }
        try FileManager.default.removeItem(atPath: io.input.path)
        #expect(throws: SensorIoError.unreadable(path: io.input.path, reason: "the file cannot be opened")) {
            try io.readCelsius()
        }
    }
}

public import CoatyCore
import CoatySync
import Synchronization

/// The hardware side of a ``Sensor``: reads its current value (and writes one, for actuators);
/// Coaty JS's `SensorIo`, with an async read instead of a callback.
///
/// ``SensorSourceController`` reads it for every observation it publishes. Implement it for
/// your hardware, or use ``MockSensorIo`` (fixed values) or ``LinuxTemperatureSensorIo``
/// (temperatures from Linux sysfs).
///
/// ```swift
/// struct BatteryIo: SensorIo {
///     func read() async throws -> JSONValue { .double(try readBatteryPercent()) }
/// }
/// ```
public protocol SensorIo: Sendable {
    /// Reads the current value.
    /// - Returns: the value, in the form of the sensor's ``Sensor/observationType``.
    /// - Throws: an error saying why the value cannot be read (typically a ``SensorIoError``).
    func read() async throws -> JSONValue

    /// Writes a value (for an actuator); by default throws ``SensorIoError/notWritable(_:)``.
    /// - Parameter value: the value.
    /// - Throws: an error saying why the value cannot be written.
    func write(_ value: JSONValue) async throws
}

extension SensorIo {
    /// Throws ``SensorIoError/notWritable(_:)``: the IO is read-only.
    /// - Parameter value: unused.
    /// - Throws: ``SensorIoError/notWritable(_:)``.
    public func write(_ value: JSONValue) async throws {
        throw SensorIoError.notWritable(String(describing: Self.self))
    }
}

/// Why a ``SensorIo`` cannot read or write.
public enum SensorIoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No temperature input exists on this machine; the associated values are the patterns
    /// searched.
    case noTemperatureSensor(searched: [String])
    /// A file could not be read or did not hold a number.
    case unreadable(path: String, reason: String)
    /// The IO (named) is read-only.
    case notWritable(String)

    /// What went wrong and what to do.
    public var description: String {
        switch self {
        case .noTemperatureSensor(let searched):
            "no temperature sensor found (searched \(searched.joined(separator: ", "))); "
                + "on a machine without one (a container, a VM) use MockSensorIo"
        case .unreadable(let path, let reason):
            "cannot read the sensor value from \(path): \(reason)"
        case .notWritable(let name):
            "\(name) is read-only: it cannot write a sensor value"
        }
    }
}

/// A ``SensorIo`` without hardware: reads give fixed values in a fixed order (Coaty JS's
/// `MockSensorIo`: a cached value, 0 until written).
///
/// ```swift
/// let io = MockSensorIo(values: [20.5, 21, 21.5])   // then 20.5 again
/// try await io.read()   // 20.5
/// try await io.write(7) // every read gives 7 from now on
/// ```
public final class MockSensorIo: SensorIo {
    private struct State {
        var values: [JSONValue]
        var next = 0
        var reads = 0
    }

    private let state: CoatyMutex<State>

    /// An IO whose every read gives `value` (0 by default, as in Coaty JS) until written.
    /// - Parameter value: the value.
    public init(value: JSONValue = 0) {
        state = CoatyMutex(State(values: [value]))
    }

    /// An IO whose reads give `values` in turn, starting over after the last; with no values,
    /// every read gives `null`.
    /// - Parameter values: the values.
    public init(values: [JSONValue]) {
        state = CoatyMutex(State(values: values.isEmpty ? [.null] : values))
    }

    /// The next value.
    /// - Returns: the value.
    public func read() async throws -> JSONValue {
        state.withLock { state in
            let value = state.values[state.next]
            state.next = (state.next + 1) % state.values.count
            state.reads += 1
            return value
        }
    }

    /// Makes every later read give `value`.
    /// - Parameter value: the value.
    public func write(_ value: JSONValue) async throws {
        state.withLock { state in
            state.values = [value]
            state.next = 0
        }
    }

    /// How many reads were made.
    public var readCount: Int { state.withLock { $0.reads } }
}

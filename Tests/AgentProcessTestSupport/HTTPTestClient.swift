// A plain HTTP/1.1 client over a POSIX socket (no URLSession: FoundationNetworking is not needed)
// and a parser of the Prometheus text exposition format, for the operator endpoint's tests.
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A new IPv4 TCP socket (-1 on failure, with `errno`).
/// Closed on `exec`, so that a broker another test spawns meanwhile does not inherit it.
func loopbackTCPSocket() -> Int32 {
    #if os(Linux)
        socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    #else
        socket(AF_INET, SOCK_STREAM, 0)
    #endif
}

/// The address `127.0.0.1:port`.
func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

/// A TCP connection to `127.0.0.1:port` whose sends and receives give up after `timeout` seconds (close-on-exec);
/// the caller closes it. The HTTP client below and the viewer's test WebSocket use it.
/// - Parameters:
///   - port: The port.
///   - timeout: The send and receive timeout, in seconds.
/// - Returns: The socket.
/// - Throws: ``TestSupportError`` when no socket can be made or the connection fails.
public func connectLoopback(port: Int, timeout: Double) throws(TestSupportError) -> Int32 {
    let fd = loopbackTCPSocket()
    guard fd >= 0 else { throw TestSupportError("socket() failed: errno \(errno)") }
    var time = timeval(tv_sec: Int(timeout), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else {
        let reason = errno
        close(fd)
        throw TestSupportError("cannot connect to 127.0.0.1:\(port): errno \(reason)")
    }
    return fd
}

/// An HTTP response as the test client read it.
public struct HTTPTestResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The headers, by lower-cased name.
    public var headers: [String: String]
    /// The body as text.
    public var body: String
}

/// Sends one HTTP/1.1 request (`Connection: close`) to `127.0.0.1:port` and reads the response to
/// the end, on a thread of its own.
/// - Parameters:
///   - port: the port.
///   - path: the request target, e.g. `/metrics`.
///   - method: the method.
///   - body: a body to send, or `nil`.
///   - contentType: its `Content-Type` (JSON by default).
///   - timeout: the longest wait for connecting and for each read, in seconds (30 by default:
///     the whole suite on 2 cores can keep an endpoint's tasks waiting for seconds).
/// - Returns: the response.
/// - Throws: ``TestSupportError`` when the connection fails or the response is not HTTP.
public func httpRequest(
    port: Int,
    path: String,
    method: String = "GET",
    body: String? = nil,
    contentType: String = "application/json",
    timeout: Double = 30
) async throws -> HTTPTestResponse {
    let raw: Result<[UInt8], TestSupportError> = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(
                returning: exchange(
                    port: port,
                    path: path,
                    method: method,
                    body: body.map { ($0, contentType) },
                    timeout: timeout
                )
            )
        }
    }
    return try parseHTTPResponse(raw.get(), hasBody: method != "HEAD")
}

private func exchange(
    port: Int,
    path: String,
    method: String,
    body: (text: String, contentType: String)?,
    timeout: Double
) -> Result<[UInt8], TestSupportError> {
    let fd: Int32
    do {
        fd = try connectLoopback(port: port, timeout: timeout)
    } catch {
        return .failure(error)
    }
    defer { close(fd) }
    var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
    let content = Array((body?.text ?? "").utf8)
    if let body { head += "Content-Type: \(body.contentType)\r\nContent-Length: \(content.count)\r\n" }
    let request = Array((head + "\r\n").utf8) + content
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return .failure(TestSupportError("send failed: errno \(errno)")) }
        sent += n
    }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n == 0 { break }
        guard n > 0 else { return .failure(TestSupportError("recv failed: errno \(errno)")) }
        response.append(contentsOf: buffer[0..<n])
        // A server that keeps the connection open despite `Connection: close` (chromedriver does) has
        // answered once the head and `Content-Length` bytes are in.
        if let length = completeLength(response), response.count >= length { break }
    }
    return .success(response)
}

/// The length of the whole response when its head is in and gives a `Content-Length`, else `nil`.
private func completeLength(_ bytes: [UInt8]) -> Int? {
    let separator: [UInt8] = Array("\r\n\r\n".utf8)
    guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else { return nil }
    let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased().components(separatedBy: "\r\n")
    guard let line = head.first(where: { $0.hasPrefix("content-length:") }),
        let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
    else { return nil }
    return end + separator.count + length
}

/// Parses a whole HTTP/1.1 response (status line, headers, a body of `Content-Length` bytes or up
/// to the end; none when `hasBody` is false, as for `HEAD`).
private func parseHTTPResponse(_ bytes: [UInt8], hasBody: Bool) throws -> HTTPTestResponse {
    let separator: [UInt8] = Array("\r\n\r\n".utf8)
    guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else {
        throw TestSupportError("not an HTTP response: \(String(decoding: bytes, as: UTF8.self))")
    }
    let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
    let statusParts = head.first?.split(separator: " ") ?? []
    guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
        throw TestSupportError("bad status line: \(head.first ?? "")")
    }
    var headers: [String: String] = [:]
    for line in head.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { throw TestSupportError("bad header line: \(line)") }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    var body = Array(bytes[(end + separator.count)...])
    if !hasBody {
        guard body.isEmpty else { throw TestSupportError("a body where none may be: \(body.count) bytes") }
    } else if let length = headers["content-length"].flatMap(Int.init) {
        guard body.count >= length else { throw TestSupportError("body shorter than Content-Length \(length)") }
        body = Array(body.prefix(length))
    }
    return HTTPTestResponse(status: status, headers: headers, body: String(decoding: body, as: UTF8.self))
}

/// One sample of a Prometheus text exposition: `name{label="value",…} value`.
public struct PrometheusSample: Sendable, Hashable {
    /// The metric name (with a histogram's `_bucket`, `_sum` or `_count`).
    public var name: String
    /// The labels.
    public var labels: [String: String]
    /// The value.
    public var value: Double
}

/// A parsed Prometheus text exposition (format 0.0.4): the samples and the `# TYPE` of each family.
public struct PrometheusExposition: Sendable {
    /// Every sample, in order.
    public var samples: [PrometheusSample]
    /// The type of each metric family (`counter`, `gauge`, `histogram`, …), by family name.
    public var types: [String: String]

    /// Parses `text`, failing on any line that is not a comment, a blank line or a valid sample.
    /// - Parameter text: the exposition.
    /// - Throws: ``TestSupportError`` naming the first bad line.
    public init(parsing text: String) throws {
        samples = []
        types = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("#") {
                let words = line.split(separator: " ")
                if words.count == 4, words[1] == "TYPE" { types[String(words[2])] = String(words[3]) }
                continue
            }
            samples.append(try Self.sample(String(line)))
        }
    }

    /// The value of the sample `name` whose labels include `labels`, or `nil` when there is none
    /// (or more than one).
    /// - Parameters:
    ///   - name: the sample name.
    ///   - labels: labels it must have.
    /// - Returns: the value.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples.filter { sample in
            sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value }
        }
        return matching.count == 1 ? matching[0].value : nil
    }

    /// The sum of the samples `name` (over all their labels), 0 when there is none.
    /// - Parameter name: the sample name.
    /// - Returns: the sum.
    public func sum(_ name: String) -> Double {
        samples.filter { $0.name == name }.reduce(0) { $0 + $1.value }
    }

    private static func sample(_ line: String) throws -> PrometheusSample {
        let scalars = Array(line.unicodeScalars)
        var index = 0
        func isNameScalar(_ scalar: Unicode.Scalar, first: Bool) -> Bool {
            scalar == "_" || scalar == ":" || (!first && ("0"..."9").contains(scalar))
                || ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
        }
        func bad(_ why: String) -> TestSupportError { TestSupportError("bad exposition line (\(why)): \(line)") }
        var name = ""
        while index < scalars.count, isNameScalar(scalars[index], first: name.isEmpty) {
            name.unicodeScalars.append(scalars[index])
            index += 1
        }
        guard !name.isEmpty else { throw bad("no metric name") }
        var labels: [String: String] = [:]
        if index < scalars.count, scalars[index] == "{" {
            index += 1
            while index < scalars.count, scalars[index] != "}" {
                var key = ""
                while index < scalars.count, isNameScalar(scalars[index], first: key.isEmpty), scalars[index] != ":" {
                    key.unicodeScalars.append(scalars[index])
                    index += 1
                }
                guard !key.isEmpty, index + 1 < scalars.count, scalars[index] == "=", scalars[index + 1] == "\"" else {
                    throw bad("label")
                }
                index += 2
                var value = ""
                while index < scalars.count, scalars[index] != "\"" {
                    if scalars[index] == "\\", index + 1 < scalars.count {
                        index += 1
                        value += scalars[index] == "n" ? "\n" : String(scalars[index])
                    } else {
                        value.unicodeScalars.append(scalars[index])
                    }
                    index += 1
                }
                guard index < scalars.count else { throw bad("unterminated label value") }
                index += 1
                labels[key] = value
                if index < scalars.count, scalars[index] == "," { index += 1 }
            }
            guard index < scalars.count else { throw bad("unterminated labels") }
            index += 1
        }
        var restScalars = String.UnicodeScalarView()
        restScalars.append(contentsOf: scalars[index...])
        let rest = String(restScalars).split(separator: " ")
        guard rest.count == 1 || rest.count == 2 else { throw bad("value") }
        let valueText = String(rest[0])
        let value: Double?
        switch valueText {
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        case "NaN": value = .nan
        default: value = Double(valueText)
        }
        guard let value else { throw bad("value is not a number") }
        return PrometheusSample(name: name, labels: labels, value: value)
    }
}

import CoatyCore
import Foundation
import Testing

@testable import CoatyRecording
@testable import CoatyStore

@Suite("Receipt metadata")
struct ReceiptMetadataTests {
    static let dates: [Date] = [
        Date(timeIntervalSince1970: 1_700_000_000.123), Date(timeIntervalSince1970: 1_700_000_000),
        Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.0), Date(timeIntervalSince1970: -12.5),
        Date(timeIntervalSince1970: 1e13), Date(timeIntervalSince1970: 0.0001),
    ]

    /// The recorder's direct JSON of a receipt is exactly what `JSONValueEncoder` writes.
    @Test(arguments: dates)
    func directJSONIsTheEncodersJSON(receivedAt: Date) throws {
        for sourceId in [nil, CoatyUUID()] {
            let receipt = ReceiptMetadata(
                sourceId: sourceId,
                eventType: "Advertise",
                topic: "t/1",
                receivedAt: receivedAt
            )
            let encoded = try JSONValueEncoder().encode(receipt)
            #expect(receipt.jsonValue.serializedString() == encoded.serializedString())
            #expect(try AnyCoatyObject.storeCoding.encodeMetadata(receipt) == encoded)
        }
    }
}

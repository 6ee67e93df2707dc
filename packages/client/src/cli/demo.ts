/** The demo tenant's guests: `m2m dev` opens a conversation with each, `m2m trigger` has one of them write in. */
export const GUESTS = [
  { name: 'Ana García', phone: '+34600000001', text: 'Hola! Can we check in early tomorrow, around 11?' },
  { name: 'Tom Becker', phone: '+34600000002', text: 'Is breakfast included in our booking?' },
  { name: 'Léa Martin', phone: '+34600000003', text: 'We will arrive late tonight, after midnight. Is that ok?' },
];

export const KNOWLEDGE = [
  {
    title: 'Check-in and check-out',
    text: 'Check-in is from 15:00 and check-out until 12:00. Early check-in from 11:00 is free when the room is ready; ask the front desk. Late arrivals: the night porter hands over keys 24 hours a day.',
  },
  {
    title: 'Breakfast',
    text: 'Breakfast is served 7:00 to 10:30 in the garden restaurant. It is included in rates named "with breakfast" and costs 14 EUR per person otherwise.',
  },
];

/** A date `days` from today as YYYY-MM-DD. */
export function dayFromNow(days: number): string {
  return new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
}
